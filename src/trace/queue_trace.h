// QueueTrace: the trace buffer of one queue. Any thread working on the
// queue's requests records into it (the frontend under the queue's lock,
// the backend thread, the FUSE thread that replies, a completion thread);
// the trace control file drains it (trace_control.h).
//
// Cost when off: TraceIf() is one load of a flag and one predictable branch.
// When on: a bounded lock-free ring of kCapacity cells (a sequence number
// per cell; producers reserve a cell with one compare-and-swap), so no
// producer ever waits: when the ring is full the event is dropped and
// counted (`lost`), and the drain reports the count as a kLost event.
//
// Memory: kCapacity * 56 bytes (3.5 MiB) per queue, allocated the first
// time the queue is traced and kept until the queue goes; none before.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "trace/event.h"

namespace pvdisk::trace {

class QueueTrace {
 public:
  static constexpr size_t kCapacity = size_t{1} << 16;  // events per queue

  explicit QueueTrace(uint16_t queue) : queue_(queue) {}
  ~QueueTrace();
  QueueTrace(const QueueTrace&) = delete;
  QueueTrace& operator=(const QueueTrace&) = delete;

  // A trace that is never turned on: for a queue whose recorder lives in
  // another process (a backend process records nothing).
  static QueueTrace* Off();

  bool on() const { return on_.load(std::memory_order_acquire); }

  // Records one event now, on the calling thread. Only while on(): use
  // TraceIf(). `event.time_ns`, `tid` and `queue` are filled in here.
  void Record(TraceEvent event);

  // Control side, one caller at a time (TraceControl's lock):
  // Start() allocates the buffer (once), drops what an earlier trace left,
  // clears the lost count and turns recording on, of the steps `scope`
  // names. Stop() turns it off;
  // what was recorded stays to be drained.
  void Start(TraceScope scope);
  void Stop();
  // Moves up to `max` events into `out`; returns how many.
  size_t Drain(TraceEvent* out, size_t max);
  // Events dropped since the last call.
  uint64_t TakeLost() { return lost_.exchange(0, std::memory_order_relaxed); }
  uint16_t queue() const { return queue_; }

 private:
  struct Cell {
    std::atomic<uint64_t> sequence;
    TraceEvent event;
  };

  const uint16_t queue_;
  std::atomic<bool> on_{false};
  std::atomic<bool> block_only_{false};  // TraceScope::kBlock
  std::unique_ptr<Cell[]> cells_;        // written before on_ is first set
  std::atomic<uint64_t> tail_{0};        // next cell to reserve (producers)
  uint64_t head_ = 0;                    // next cell to drain (control side)
  std::atomic<uint64_t> lost_{0};
};

// Records `event` into `trace` if it is on.
inline void TraceIf(QueueTrace* trace, const TraceEvent& event) {
  if (__builtin_expect(trace->on(), 0)) trace->Record(event);
}

}  // namespace pvdisk::trace
