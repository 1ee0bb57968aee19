// HugeBufferArena: buffers of power-of-two sizes from 4 KiB to 2 MiB,
// carved out of one anonymous mapping advised into transparent huge pages
// (MADV_HUGEPAGE), for data that is copied in once and written to a file
// with O_DIRECT (the volatile write cache's held writes,
// io/volatile_cache.h).
//
// Why huge pages: a buffer in 4 KiB pages reaches a virtio-blk disk as one
// segment per page (256 for 1 MiB), a buffer inside one 2 MiB page as one
// segment, as the FUSE payload arena found for reads
// (fuse/channel/payload_arena.h); O_DIRECT pins one huge page instead of
// 256 small ones; the copy into the buffer takes no TLB miss per 4 KiB;
// and a buffer reused from the arena never faults.
//
// How: a buddy allocator over 2 MiB pages. A block of 2^k bytes lies at a
// multiple of its size inside one huge page, so it is physically
// contiguous once the page is huge. Pages are handed out in address order
// and a freed block merges with its free buddy, so a busy arena reuses the
// pages it has touched (resident) before it touches new ones.
//
// The memory bound: the mapping is `capacity` bytes of address space;
// only the pages blocks were ever taken from become resident, and stay so
// (reuse is the point), so resident memory is at most capacity. When no
// block is free Take returns nullptr: the caller allocates elsewhere.
//
// Thread-safe: one mutex around the free lists.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>

namespace pvdisk::io {

class HugeBufferArena {
 public:
  static constexpr uint64_t kMinBlock = 4096;
  static constexpr uint64_t kHugePage = 2ull << 20;

  // Reserves `capacity` bytes of address space, rounded up to whole huge
  // pages (nothing resident yet). If the mapping fails, every Take returns
  // nullptr.
  explicit HugeBufferArena(uint64_t capacity);
  ~HugeBufferArena();
  HugeBufferArena(const HugeBufferArena&) = delete;
  HugeBufferArena& operator=(const HugeBufferArena&) = delete;

  // The block size that holds `size` bytes: the power of two at or above
  // it, at least kMinBlock.
  static uint64_t BlockFor(uint64_t size);

  // A block of `block` bytes (a power of two, kMinBlock..kHugePage),
  // aligned to its size; nullptr when the arena has no free block that
  // size (full, or too fragmented) or no mapping.
  uint8_t* Take(uint64_t block);
  // Gives back a block Take returned, with the same `block` size.
  void Give(uint8_t* at, uint64_t block);
  bool Owns(const uint8_t* at) const {
    return base_ != nullptr && at >= base_ && at < base_ + capacity_;
  }

  uint64_t capacity() const { return capacity_; }
  // Whether the kernel took the MADV_HUGEPAGE advice (false where
  // transparent huge pages are off: the arena then works in 4 KiB pages).
  bool advised_huge() const { return advised_huge_; }
  // Bytes of blocks taken and not given back.
  uint64_t used_bytes() const;
  // Bytes of the huge pages blocks were ever taken from: what may be
  // resident.
  uint64_t touched_bytes() const;

 private:
  static constexpr int kOrders = 10;  // 4 KiB << 9 == 2 MiB

  static int OrderOf(uint64_t block);

  uint8_t* base_ = nullptr;
  uint64_t capacity_ = 0;
  bool advised_huge_ = false;

  mutable std::mutex mu_;
  // Free blocks of 4 KiB << k, by offset in the arena; guarded by mu_.
  std::set<uint64_t> free_[kOrders];
  uint64_t next_page_ = 0;  // pages below it were touched; guarded by mu_
  uint64_t used_ = 0;       // guarded by mu_
};

}  // namespace pvdisk::io
