// Creates the engine a mount asked for (--engine uring|sync|null).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/delay_engine.h"
#include "io/image_file.h"
#include "io/io_engine.h"
#include "io/ring_lender.h"
#include "io/volatile_cache.h"
#include "io/write_log.h"

namespace pvdisk::io {

// kRbd is not chosen with --engine: an rbd: disk always uses it (see
// rbd_engine.h, which creates it from an RbdImage instead of an ImageFile).
enum class EngineKind { kUring, kSync, kNull, kRbd };

// Parses "uring", "sync" or "null"; anything else is InvalidArgument naming
// the allowed values.
absl::StatusOr<EngineKind> ParseEngineKind(std::string_view text);
std::string_view EngineKindName(EngineKind kind);

// A range of 512-byte sectors on which every read and write fails with -EIO,
// to test how faults reach the caller (`--disk IMG,eio=SECTOR[+COUNT]`).
struct FaultRange {
  uint64_t first_sector = 0;
  uint64_t sector_count = 1;
};

// The deepest engine, extra I/Os included: the uring engine's ring (depth
// plus extra_ios plus 16 spare entries, rounded up to a power of two) must
// stay within the kernel's 32768 entries.
inline constexpr uint32_t kMaxEngineDepth = 32768 - 16;

// The files an engine is made over, top first (the order of
// image::Image::files()): IoRequest::file indexes this list. Each must stay
// open for the engine's lifetime. A request must lie within its file's size
// as opened. The engine's mode() describes the first file's I/O (O_DIRECT or
// buffered).
using EngineFiles = std::vector<const ImageFile*>;

// The most files one engine serves (IoRequest::file is 16 bits).
inline constexpr size_t kMaxEngineFiles = 1024;

// What requests must lie within, by index: a raw disk's size as opened, a
// format layer's request limit (ImageFile::request_limit_bytes).
inline std::vector<uint64_t> FileSizes(const EngineFiles& files) {
  std::vector<uint64_t> sizes;
  sizes.reserve(files.size());
  for (const ImageFile* file : files) {
    sizes.push_back(file->request_limit_bytes());
  }
  return sizes;
}

struct EngineOptions {
  EngineKind kind = EngineKind::kUring;
  // Most requests that will ever be in flight at once (the sum of the ring
  // depths the owning thread serves). The uring engine sizes its ring from it.
  uint32_t depth = 256;
  // I/Os a layer may have in flight beyond `depth`: a format, or any engine
  // decorator that turns one request into several engine I/Os, issues them
  // on the engine below it, which must have room for them (ublksrv calls
  // these extra_ios). The image says how many per ring request
  // (image::Image::extra_ios_per_request; a raw image 0) and the disk sets
  // depth times that. Engines size themselves for depth + extra_ios (the
  // uring engine its ring and slots) and refuse more with -EBUSY.
  uint32_t extra_ios = 0;
  // When set, I/O touching this range completes with -EIO.
  std::optional<FaultRange> fault;
  // When set, completions are held this long after submission (a device
  // latency model, `--disk IMG,delay=US`; see delay_engine.h).
  std::optional<CompletionDelay> delay;
  // When set, the uring engine queues its I/O on this thread's ring instead
  // of one of its own, and the rbd engine watches its completion mailbox there
  // (the inline placement; see io/ring_lender.h), and the delay model
  // queues its timer there. Other engines ignore it.
  RingLender* ring_lender = nullptr;
  // When set, the disk has a volatile write cache (`--disk IMG,
  // cache=volatile`; see volatile_cache.h), shared by all its engines: its
  // decorator goes right over the file engine.
  std::shared_ptr<VolatileCache> volatile_cache;
  // When set, the disk logs its writes, discards and flushes there
  // (`--disk IMG,log=FILE`; see log_engine.h), shared by all its engines:
  // its decorator goes over all the others.
  std::shared_ptr<WriteLog> write_log;
};

// `image` must stay open for the engine's lifetime. Checks `options`
// against the file's size (CheckEngineOptions) and wraps the engine
// (WrapEngine): a raw image's engine as tests and benchmarks make it.
absl::StatusOr<std::unique_ptr<IoEngine>> CreateEngine(
    const EngineOptions& options, const ImageFile& image);

// The bare engine of options.kind (uring, sync or null) over `files` (1 to
// kMaxEngineFiles of them, top first): no checks of the options, no
// decorators. For an image layer (image/) that checks against its own
// virtual size and wraps the engine itself.
absl::StatusOr<std::unique_ptr<IoEngine>> CreateFileEngine(
    const EngineOptions& options, const EngineFiles& files);

// For engines made elsewhere (the rbd engine): whether `options` fit an image
// of `size_sectors` called `image_name`, and the decorators `options` ask
// for (faults, delay) around `engine`, plus the test-only faults
// PVDISK_TEST_FAULT asks for (test_fault.h). CreateEngine does both.
absl::Status CheckEngineOptions(const EngineOptions& options,
                                uint64_t size_sectors,
                                std::string_view image_name);
absl::StatusOr<std::unique_ptr<IoEngine>> WrapEngine(
    std::unique_ptr<IoEngine> engine, const EngineOptions& options);

}  // namespace pvdisk::io
