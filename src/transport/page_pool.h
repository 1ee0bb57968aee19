// PagePool: the frontend's pool of data pages ("persistent grants"), handed
// out as contiguous runs so that a ring request's data is one range of
// memory (one fixed-buffer I/O at the backend, one piece in the reply).
//
// A buddy allocator: runs are powers of two pages, split on allocation and
// merged with their buddy on free; both are O(log pages). Freed runs go to the
// front of their list and are reused first, so a hot subset of pages is
// reused (blkif.h's advice for persistent grants). Not thread-safe: the
// owning queue's lock protects it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace pvdisk::transport {

class PagePool {
 public:
  // REQUIRES: `pages` is a power of two.
  explicit PagePool(uint32_t pages);

  // The first page of a free run of at least `count` pages (RunPages(count)
  // exactly), or nullopt if no run that large is free. REQUIRES: count >= 1.
  std::optional<uint32_t> Allocate(uint32_t count);
  // Returns a run. REQUIRES: Allocate(count) returned `first` and it was not
  // freed since.
  void Free(uint32_t first, uint32_t count);

  // Pages a run for `count` pages really takes: the next power of two.
  static uint32_t RunPages(uint32_t count);

  uint32_t pages() const { return pages_; }
  uint32_t free_pages() const { return free_pages_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  static int OrderOf(uint32_t count);
  void PushFree(uint32_t first, int order);
  void RemoveFree(uint32_t first, int order);

  uint32_t pages_;
  int max_order_;
  uint32_t free_pages_;
  // Per order, a doubly linked list of free runs threaded through next_ and
  // prev_ (indexed by a run's first page). free_order_[p] is the order of the
  // free run starting at p, or -1.
  std::vector<uint32_t> heads_;
  std::vector<uint32_t> next_;
  std::vector<uint32_t> prev_;
  std::vector<int8_t> free_order_;
};

}  // namespace pvdisk::transport
