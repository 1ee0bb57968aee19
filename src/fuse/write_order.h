// WriteOrder: orders the writes of one disk that a read-modify-write (RMW)
// could otherwise undo.
//
// An unaligned write is an RMW cycle: read the first and last sector, patch
// the new bytes in, write the whole sectors back. Anything written to those
// sectors between the read and the write-back would be overwritten with the
// old bytes. So:
//
// - an RMW waits for every overlapping write (plain or RMW) in flight, and
// - every write, discard or write-zeroes overlapping an RMW in progress (or
//   waiting) waits for it.
//
// Plain writes among themselves are not ordered: two overlapping plain
// writes in flight at once have no defined order on a disk either.
//
// How the common case stays cheap. The disk is cut into 1 MiB stripes,
// hashed onto kSlots cache-line-sized slots; each slot's one atomic word
// counts the plain writes in flight in its stripes (low half) and the RMWs
// registered there (high half). A plain write adds itself to the slots of
// its range with one atomic add each and looks at what the add returned: if
// no RMW is registered there it goes ahead (TryAcquireWrite; no lock, no
// allocation; one add when it starts and one when it ends, on a line shared
// only with writes to the same stripes). If an RMW is registered, it backs
// out and takes the slow path: a shared hold of the RangeLock, under its
// mutex. An RMW registers in its slots first (so no new plain write passes
// it there), waits until the plain writes it found there have ended, then
// takes the RangeLock exclusively. Because both sides make their mark with
// an atomic read-modify-write of the same word, one of them always sees the
// other. The price of an RMW is that, while it is registered, every write
// to the same 1 MiB stripes (or stripes aliasing them) takes the mutex, and
// that it also waits for non-overlapping plain writes in those stripes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>

#include "fuse/range_lock.h"

namespace pvdisk::fuse {

class WriteOrder {
 public:
  // Stripes of 2^11 sectors (1 MiB), the same as --queue-map offset.
  static constexpr int kStripeShift = 11;
  static constexpr uint32_t kSlots = 64;

  // What Release needs to know about a write allowed to go.
  struct Hold {
    enum class Kind { kPlainFast, kPlainLocked, kReadModifyWrite };
    uint64_t first;
    uint64_t count;
    Kind kind;
  };
  using Start = std::function<void(const Hold&)>;

  // A plain write (write, discard, write-zeroes) of sectors
  // [first, first + count), lock-free: returns its hold if it may go now,
  // or nothing if an RMW is registered in its stripes (then use
  // AcquireWrite, which may wait).
  std::optional<Hold> TryAcquireWrite(uint64_t first, uint64_t count);
  // A plain write that may wait: calls `start` now (on this thread) or once
  // every overlapping RMW has released (on the releasing thread).
  void AcquireWrite(uint64_t first, uint64_t count, Start start);
  // An RMW of sectors [first, first + count): calls `start` once no
  // overlapping write is in flight, now or on the thread ending the last
  // one.
  void AcquireReadModifyWrite(uint64_t first, uint64_t count, Start start);
  // Ends a hold once its write has completed. May start waiting writes on
  // this thread.
  void Release(const Hold& hold);

 private:
  // Slots [first, first + count) modulo kSlots.
  struct SlotSpan {
    uint32_t first;
    uint32_t count;
  };
  struct alignas(64) Slot {
    // Low 32 bits: plain writes in flight on the fast path; high 32 bits:
    // RMWs registered.
    std::atomic<uint64_t> word{0};
  };
  static constexpr uint64_t kPlainOne = 1;
  static constexpr uint64_t kRmwOne = uint64_t{1} << 32;
  static constexpr uint64_t kPlainMask = kRmwOne - 1;

  struct Draining {
    Hold hold;
    Start start;
  };

  static SlotSpan SlotsOf(uint64_t first, uint64_t count);
  Slot& SlotAt(const SlotSpan& span, uint32_t i) {
    return slots_[(span.first + i) % kSlots];
  }
  // Takes the fast-path mark off the first `n` slots of `span`; wakes RMWs
  // if that left a slot with an RMW registered and no plain write.
  void LeaveFast(const SlotSpan& span, uint32_t n);
  bool PlainWritesIn(const SlotSpan& span);
  // Moves the RMWs whose slots have no plain write left on to the RangeLock.
  void StartDrained();
  void LockExclusive(Draining rmw);

  Slot slots_[kSlots];
  std::mutex drain_mu_;
  std::list<Draining> draining_;  // RMWs waiting for plain writes to end
  RangeLock lock_;
};

}  // namespace pvdisk::fuse
