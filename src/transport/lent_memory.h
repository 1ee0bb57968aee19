// LentMemory: memory outside a queue's shared region that its frontend may
// grant to the backend directly, as a guest grants the pages its own
// buffers are in: the FUSE uring channel's payload buffers
// (fuse/channel/payload_arena.h). A read or write whose data already lies
// there, page aligned, is carried on those pages instead of a run of the
// data pool: the backend reads into them or writes from them, and nothing
// is copied in between (`zero_copy_ios`).
//
// Lent page i has grant reference (data-page number) LentFirstPage(R) + i,
// where R = pool pages + table pages, the region's data pages: the
// references beyond the region, after a gap of one that is never granted,
// so that no run of consecutive references (which the backend maps as one
// range of memory) spans the region's last page and the first lent page.
// Only an in-process backend with persistent grants can reach it (the
// memory is not in the memfd that a backend process or a per-request
// mapping sees); Queue::Create refuses anything else.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pvdisk::transport {

inline uint32_t LentFirstPage(uint32_t region_data_pages) {
  return region_data_pages + 1;
}

struct LentMemory {
  uint8_t* base = nullptr;  // page aligned
  size_t bytes = 0;         // a multiple of 4096

  bool empty() const { return bytes == 0; }
  uint32_t pages() const { return static_cast<uint32_t>(bytes / 4096); }
  // Whether [data, data + length) lies inside and starts on a page boundary.
  bool Holds(const void* data, size_t length) const {
    auto at = reinterpret_cast<uintptr_t>(data);
    auto begin = reinterpret_cast<uintptr_t>(base);
    return at % 4096 == 0 && at >= begin && at - begin < bytes &&
           length <= bytes - (at - begin);
  }
  // The lent page `data` is on. REQUIRES: Holds(data, 1).
  uint32_t PageOf(const void* data) const {
    return static_cast<uint32_t>((reinterpret_cast<uintptr_t>(data) -
                                  reinterpret_cast<uintptr_t>(base)) /
                                 4096);
  }
};

}  // namespace pvdisk::transport
