// RangeLock: serialises read-modify-write cycles on overlapping sector ranges
// of one disk, so that two unaligned writes sharing a sector cannot both
// read the old sector and lose one another's bytes. Only RMW writes take it;
// aligned I/O never waits here. Waiters start in FIFO order as soon as
// nothing they overlap is held.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <vector>

namespace pvdisk::fuse {

class RangeLock {
 public:
  // Holds sectors [first, first + count) and calls `start`, now (on this
  // thread) or later (on the thread that releases a conflicting range).
  void Acquire(uint64_t first, uint64_t count, std::function<void()> start);
  // Releases a range acquired earlier with exactly these bounds.
  void Release(uint64_t first, uint64_t count);

 private:
  struct Range {
    uint64_t first;
    uint64_t count;
    bool Overlaps(const Range& other) const {
      return first < other.first + other.count && other.first < first + count;
    }
  };
  struct Waiter {
    Range range;
    std::function<void()> start;
  };
  bool OverlapsHeld(const Range& range) const;

  std::mutex mu_;
  std::vector<Range> held_;
  std::list<Waiter> waiting_;
};

}  // namespace pvdisk::fuse
