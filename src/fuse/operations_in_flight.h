// OperationsInFlight: counts the operations a disk has accepted and not yet
// answered, so that shutdown can wait for every one of them.
//
// DiskIo counts each Read/Write/Flush/Zero from the moment it is accepted
// until its `done` has returned, including the time an operation spends
// waiting for the write order (an unaligned write behind another one) and
// between the read and the write phase of a read-modify-write. The queues
// only see requests once they are submitted, so only this count knows about
// an operation that will submit later; waiting for the queues alone would
// miss it and leave unmount waiting forever.
//
// Cost: one atomic increment and one decrement per operation on a counter
// shared by every thread using the disk; the mutex is taken only by a
// decrement to zero while a shutdown waits.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace pvdisk::fuse {

class OperationsInFlight {
 public:
  // An operation was accepted.
  void Begin() { count_.fetch_add(1, std::memory_order_seq_cst); }
  // Begin(), unless Close() has run: then nothing is counted and false is
  // returned. seq_cst on both sides: either this sees the close, or the
  // closer's WaitForZero sees this operation.
  bool TryBegin() {
    Begin();
    if (!closed_.load(std::memory_order_seq_cst)) return true;
    End();
    return false;
  }
  // From now on TryBegin() refuses; what has begun goes on (WaitForZero
  // waits for it).
  void Close() { closed_.store(true, std::memory_order_seq_cst); }
  // An operation was answered (its `done` has returned). Nothing may touch
  // the disk's state after the last End() of a shutdown returns.
  void End();
  // Blocks until every operation begun has ended. The caller must make sure
  // no new operation begins (the FUSE loop has ended).
  void WaitForZero();
  // The same, giving up at `deadline`; returns whether every operation
  // ended.
  bool WaitForZeroUntil(std::chrono::steady_clock::time_point deadline);

  int64_t count() const { return count_.load(std::memory_order_acquire); }

 private:
  std::atomic<int64_t> count_{0};
  // Set by WaitForZero, so that End() takes the mutex only when someone may
  // wait (seq_cst on both sides: either End sees it, or the waiter sees 0).
  std::atomic<bool> waiting_{false};
  std::atomic<bool> closed_{false};
  std::mutex mu_;
  std::condition_variable zero_;
};

}  // namespace pvdisk::fuse
