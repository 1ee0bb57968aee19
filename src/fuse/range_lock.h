// RangeLock: a shared/exclusive lock on sector ranges of one disk, with
// waiters served in FIFO order.
//
// Two holds conflict when their ranges overlap and at least one of them is
// exclusive: shared holds of overlapping ranges run together. A request
// starts as soon as it conflicts with nothing held and with no earlier
// waiter, so a stream of shared holds cannot starve an exclusive one.
//
// It is the slow path of WriteOrder (src/fuse/write_order.h): plain writes
// take it shared and read-modify-write cycles exclusive, and only while some
// read-modify-write is near. One mutex guards it.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <vector>

namespace pvdisk::fuse {

class RangeLock {
 public:
  enum class Mode { kShared, kExclusive };

  // Holds sectors [first, first + count) in `mode` and calls `start`, now
  // (on this thread, before returning) or later (on the thread whose
  // Release let it start).
  void Acquire(uint64_t first, uint64_t count, Mode mode,
               std::function<void()> start);
  // Releases a hold acquired earlier with exactly these bounds and mode.
  void Release(uint64_t first, uint64_t count, Mode mode);

 private:
  struct Hold {
    uint64_t first;
    uint64_t count;
    Mode mode;
    bool ConflictsWith(const Hold& other) const {
      bool overlap =
          first < other.first + other.count && other.first < first + count;
      return overlap &&
             (mode == Mode::kExclusive || other.mode == Mode::kExclusive);
    }
  };
  struct Waiter {
    Hold hold;
    std::function<void()> start;
  };
  bool ConflictsWithHeld(const Hold& hold) const;

  std::mutex mu_;
  std::vector<Hold> held_;
  std::list<Waiter> waiting_;
};

}  // namespace pvdisk::fuse
