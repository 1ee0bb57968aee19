// The file handle of an open stats file: the text taken at OPEN, so that
// one reader sees one consistent table. The kernel gets it (as fh) in OPEN's
// reply and hands it back with each READ and with RELEASE, which may come on
// any FUSE thread; the kernel orders those after OPEN's reply, and RELEASE
// after the READs' replies. That order goes through the kernel, so each use
// tells ThreadSanitizer of it (base/kernel_ordered.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "base/kernel_ordered.h"

namespace pvdisk::fuse {

class StatsSnapshot {
 public:
  // The snapshot as a file handle, for OPEN's reply.
  static uint64_t Open(std::string text) {
    auto* snapshot = new StatsSnapshot(std::move(text));
    KernelOrderedRelease(snapshot);
    return reinterpret_cast<uint64_t>(snapshot);
  }

  // Up to `size` bytes of the text from `offset`, for READ. A copy: the
  // snapshot is done with before the reply goes out, since once it has, the
  // kernel may pass RELEASE to another thread at once (and the classic
  // channel's writev(2) is seen by TSan to read its buffers only when it
  // returns, which may be after that).
  static std::string Read(uint64_t handle, uint64_t offset, uint64_t size) {
    const StatsSnapshot* snapshot = From(handle);
    KernelOrderedAcquire(snapshot);
    const std::string& text = snapshot->text_;
    size_t from = std::min<uint64_t>(offset, text.size());
    size_t count = std::min<uint64_t>(size, text.size() - from);
    std::string piece = text.substr(from, count);
    KernelOrderedRelease(snapshot);
    return piece;
  }

  // Frees a handle that Open returned, at RELEASE.
  static void Release(uint64_t handle) {
    StatsSnapshot* snapshot = From(handle);
    KernelOrderedAcquire(snapshot);
    delete snapshot;
  }

 private:
  explicit StatsSnapshot(std::string text) : text_(std::move(text)) {}
  static StatsSnapshot* From(uint64_t handle) {
    return reinterpret_cast<StatsSnapshot*>(handle);
  }

  const std::string text_;
};

}  // namespace pvdisk::fuse
