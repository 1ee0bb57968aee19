#include "io/huge_buffer_arena.h"

#include <sys/mman.h>

#include <bit>

namespace pvdisk::io {

HugeBufferArena::HugeBufferArena(uint64_t capacity) {
  capacity_ = (capacity + kHugePage - 1) / kHugePage * kHugePage;
  if (capacity_ == 0) return;
  // One huge page more, so that the mapping can start on a huge page.
  const uint64_t span = capacity_ + kHugePage;
  void* mapped = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) {
    capacity_ = 0;
    return;
  }
  auto* start = static_cast<uint8_t*>(mapped);
  const uintptr_t address = reinterpret_cast<uintptr_t>(start);
  const uint64_t head = (kHugePage - address % kHugePage) % kHugePage;
  if (head > 0) munmap(start, head);
  const uint64_t tail = span - head - capacity_;
  if (tail > 0) munmap(start + head + capacity_, tail);
  base_ = start + head;
  advised_huge_ = madvise(base_, capacity_, MADV_HUGEPAGE) == 0;
}

HugeBufferArena::~HugeBufferArena() {
  if (base_ != nullptr) munmap(base_, capacity_);
}

uint64_t HugeBufferArena::BlockFor(uint64_t size) {
  return size <= kMinBlock ? kMinBlock : std::bit_ceil(size);
}

int HugeBufferArena::OrderOf(uint64_t block) {
  return std::countr_zero(block) - std::countr_zero(kMinBlock);
}

uint8_t* HugeBufferArena::Take(uint64_t block) {
  if (base_ == nullptr || block < kMinBlock || block > kHugePage ||
      !std::has_single_bit(block)) {
    return nullptr;
  }
  const int want = OrderOf(block);
  std::lock_guard<std::mutex> lock(mu_);
  // The smallest free block that fits, else a page never used.
  int order = want;
  while (order < kOrders && free_[order].empty()) ++order;
  uint64_t offset;
  if (order < kOrders) {
    auto lowest = free_[order].begin();
    offset = *lowest;
    free_[order].erase(lowest);
  } else if (next_page_ * kHugePage < capacity_) {
    offset = next_page_++ * kHugePage;
    order = kOrders - 1;
  } else {
    return nullptr;
  }
  // Split: the upper halves go free.
  while (order > want) {
    --order;
    free_[order].insert(offset + (kMinBlock << order));
  }
  used_ += block;
  return base_ + offset;
}

void HugeBufferArena::Give(uint8_t* at, uint64_t block) {
  uint64_t offset = static_cast<uint64_t>(at - base_);
  int order = OrderOf(block);
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= block;
  // Merge with the buddy while it is free, up to a whole huge page.
  while (order < kOrders - 1) {
    const uint64_t buddy = offset ^ (kMinBlock << order);
    if (free_[order].erase(buddy) == 0) break;
    offset &= ~(kMinBlock << order);
    ++order;
  }
  free_[order].insert(offset);
}

uint64_t HugeBufferArena::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

uint64_t HugeBufferArena::touched_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_page_ * kHugePage;
}

}  // namespace pvdisk::io
