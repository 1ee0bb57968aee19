// HugePromotion: which huge pages of the payload arena (payload_arena.h)
// are to be made huge because an entry in them carried a large request,
// and how many each queue may still have made so.
//
// Why: the top --fuse-huge-entries entries of a queue are huge from the
// start, and a queue that never holds more requests than that uses only
// them. After a deeper burst the kernel's order of free entries is mixed,
// and later large requests land on entries in 4 KiB pages, each page one
// disk segment (128 KiB sequential reads about a third slower,
// docs/perf/nvme-sequential-2026-12-05.md). So the first large request on
// such an entry asks for its huge page (Want); a collapser thread makes it
// huge (huge_collapser.h) once no fixed buffer pins it: the queue threads
// drop their registrations of wanted entries (FixedBufferTable::
// DropUnpinnable) and register none while it is wanted (Pinnable).
//
// The bound: each queue may have as many bytes made huge so as its huge
// entries take (huge_entries * payload_bytes), so that the resident
// payloads stay within twice what the huge entries alone cost.
//
// Thread-safe: Want and Pinnable are lock-free (one atomic load when there
// is nothing to do), the rest takes a mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace pvdisk::fuse::channel {

// The size of a transparent huge page on x86-64 and arm64 (4 KiB base
// pages).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// A request that reaches the disk through plain I/O (larger than the
// largest one through a fixed buffer, fixed_buffer_table.h).
inline constexpr uint32_t kLargeRequestBytes = (64 << 10) + 1;

class HugePromotion {
 public:
  enum class State : uint8_t {
    kSmall,   // in 4 KiB pages, nothing asked
    kWanted,  // asked for; not pinnable until settled
    kHuge,    // advised from the start, or collapsed
    kGaveUp,  // the collapse failed for good (advised all the same)
  };

  // `base`: the arena, aligned to kHugePageBytes. `limit_bytes`: what each
  // queue may have made huge.
  HugePromotion(uint8_t* base, size_t bytes, uint32_t queues, uint32_t depth,
                uint32_t payload_bytes, size_t limit_bytes);

  // The huge pages of [start, end) are huge already (advised before use).
  void MarkHuge(uintptr_t start, uintptr_t end);

  // Entry `index` of queue `qid` carried a large request: asks for the huge
  // pages it lies in, if they are small and the queue's bound allows.
  // Returns true if it asked (then the collapser is to be told).
  bool Want(uint32_t qid, uint32_t index);

  // Whether arena entry `entry` (qid * depth + index) may be pinned by a
  // fixed buffer: not while a huge page of it is wanted.
  bool Pinnable(uint64_t entry) const;
  // Moves each time a page becomes wanted.
  uint64_t generation() const {
    return generation_.load(std::memory_order_acquire);
  }

  // The collapser's side: the wanted pages not yet settled (their
  // addresses), waiting up to `wait` for one; and a page's outcome.
  std::vector<uint8_t*> Pending(std::chrono::milliseconds wait);
  void Settle(uint8_t* page, State state);
  // Ends a Pending wait now (to stop).
  void Interrupt();

  // Pages made huge after use, and given up on, so far.
  uint64_t promoted() const { return promoted_.load(); }
  uint64_t gave_up() const { return gave_up_.load(); }
  size_t limit_bytes() const { return limit_bytes_; }

 private:
  size_t PageOf(const uint8_t* at) const {
    return static_cast<size_t>(at - base_) / kHugePageBytes;
  }
  State StateOf(size_t page) const {
    return static_cast<State>(states_[page].load(std::memory_order_acquire));
  }

  uint8_t* const base_;
  const size_t pages_;
  const uint32_t depth_;
  const uint32_t payload_bytes_;
  const size_t limit_bytes_;
  std::unique_ptr<std::atomic<uint8_t>[]> states_;  // per huge page
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> promoted_{0};
  std::atomic<uint64_t> gave_up_{0};

  // Per queue: the bytes asked for so far (never given back, so that the
  // bound holds whatever became of them).
  std::unique_ptr<std::atomic<size_t>[]> asked_bytes_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> pending_;  // wanted pages, not yet settled
  bool interrupted_ = false;
};

}  // namespace pvdisk::fuse::channel
