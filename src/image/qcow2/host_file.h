// HostFile: the one way the qcow2 layer reads, writes and syncs a host file
// on its control and metadata path (Qcow2File's table loads and metadata
// writes, the journal's commits, cluster copies, compressed reads). The
// request path's data I/O goes through the engines instead.
//
// The plain implementation (MakeFdHostFile) is pread/pwrite/fdatasync on a
// descriptor. A disk with a volatile write cache (cache=volatile,
// io/volatile_cache.h) puts its top file's HostFile over the cache
// (image/volatile_host_file.h), so that its metadata follows the same
// model as its data: a write is held until a sync, and a power cut decides
// which held writes reach the file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"

namespace pvdisk::image::qcow2 {

class HostFile {
 public:
  virtual ~HostFile() = default;

  // Reads `out.size()` bytes at `offset`, as the file holds them once
  // every completed Write reaches it; bytes past the end of the file read
  // as zeros.
  virtual absl::Status Read(uint64_t offset, std::span<uint8_t> out) const = 0;
  // Writes all of `data` at `offset`: complete when this returns, durable
  // after the next Sync.
  virtual absl::Status Write(uint64_t offset,
                             std::span<const uint8_t> data) = 0;
  // Makes every Write that returned before the call durable.
  virtual absl::Status Sync() = 0;
};

// pread/pwrite/fdatasync on `fd` (borrowed; open while the HostFile is
// used), retrying short transfers and EINTR; errors name `name`.
std::unique_ptr<HostFile> MakeFdHostFile(int fd, std::string name);

}  // namespace pvdisk::image::qcow2
