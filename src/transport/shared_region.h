// A memfd-backed shared memory region: a queue's ring and data pages. Each
// side maps it separately, so the two sides refer to memory by offset or page
// index, never by pointer; the backend could live in another process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pvdisk::transport {

// One mapping of a region. Unmaps on destruction.
class RegionMapping {
 public:
  RegionMapping(uint8_t* base, size_t size) : base_(base), size_(size) {}
  ~RegionMapping();
  RegionMapping(const RegionMapping&) = delete;
  RegionMapping& operator=(const RegionMapping&) = delete;

  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  uint8_t* base_;
  size_t size_;
};

class SharedRegion {
 public:
  // Creates a zero-filled region of `size` bytes (a multiple of 4096).
  // `name` shows in /proc/PID/fd for debugging.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(
      const std::string& name, size_t size);
  // Takes ownership of `fd`, a region of `size` bytes made elsewhere (a
  // backend process receives its queues' regions this way).
  static std::unique_ptr<SharedRegion> Adopt(int fd, size_t size) {
    return std::unique_ptr<SharedRegion>(new SharedRegion(fd, size));
  }
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // Maps the whole region once more (read-write, shared).
  absl::StatusOr<std::unique_ptr<RegionMapping>> Map() const;
  // Maps only the first `length` bytes (a multiple of 4096).
  absl::StatusOr<std::unique_ptr<RegionMapping>> MapFirst(size_t length) const;

  int fd() const { return fd_; }
  size_t size() const { return size_; }

 private:
  SharedRegion(int fd, size_t size) : fd_(fd), size_(size) {}
  int fd_;
  size_t size_;
};

}  // namespace pvdisk::transport
