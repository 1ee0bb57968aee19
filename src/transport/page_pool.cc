#include "transport/page_pool.h"

#include <bit>

namespace pvdisk::transport {

PagePool::PagePool(uint32_t pages)
    : pages_(pages),
      max_order_(std::countr_zero(pages)),
      free_pages_(0),
      heads_(max_order_ + 1, kNone),
      next_(pages, kNone),
      prev_(pages, kNone),
      free_order_(pages, -1) {
  PushFree(0, max_order_);
}

uint32_t PagePool::RunPages(uint32_t count) { return std::bit_ceil(count); }

int PagePool::OrderOf(uint32_t count) {
  return std::countr_zero(std::bit_ceil(count));
}

void PagePool::PushFree(uint32_t first, int order) {
  next_[first] = heads_[order];
  prev_[first] = kNone;
  if (heads_[order] != kNone) prev_[heads_[order]] = first;
  heads_[order] = first;
  free_order_[first] = static_cast<int8_t>(order);
  free_pages_ += uint32_t{1} << order;
}

void PagePool::RemoveFree(uint32_t first, int order) {
  if (prev_[first] != kNone) {
    next_[prev_[first]] = next_[first];
  } else {
    heads_[order] = next_[first];
  }
  if (next_[first] != kNone) prev_[next_[first]] = prev_[first];
  free_order_[first] = -1;
  free_pages_ -= uint32_t{1} << order;
}

std::optional<uint32_t> PagePool::Allocate(uint32_t count) {
  int order = OrderOf(count);
  if (order > max_order_) return std::nullopt;
  int found = order;
  while (found <= max_order_ && heads_[found] == kNone) ++found;
  if (found > max_order_) return std::nullopt;
  uint32_t first = heads_[found];
  RemoveFree(first, found);
  // Split: keep the lower half, free the upper half, until the run fits.
  while (found > order) {
    --found;
    PushFree(first + (uint32_t{1} << found), found);
  }
  return first;
}

void PagePool::Free(uint32_t first, uint32_t count) {
  int order = OrderOf(count);
  while (order < max_order_) {
    uint32_t buddy = first ^ (uint32_t{1} << order);
    if (free_order_[buddy] != order) break;
    RemoveFree(buddy, order);
    first &= ~(uint32_t{1} << order);
    ++order;
  }
  PushFree(first, order);
}

}  // namespace pvdisk::transport
