// The live counters of one queue: one cache-line-aligned block, updated with
// relaxed atomics by the threads that serve the queue and read by the stats
// file. Nothing here takes a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "stats/counters.h"
#include "stats/latency_histogram.h"

namespace pvdisk::stats {

// Which way a FUSE request moves data, for its latency.
enum class Direction { kRead, kWrite };

// A consistent-enough copy of one queue's counters for rendering.
struct QueueSnapshot {
  CounterValues values{};
  LatencyHistogram::Buckets read_latency{};
  LatencyHistogram::Buckets write_latency{};

  uint64_t Get(Counter c) const { return values[Index(c)]; }
  const LatencyHistogram::Buckets& latency(Direction d) const {
    return d == Direction::kRead ? read_latency : write_latency;
  }
  // Both directions' histograms added together.
  LatencyHistogram::Buckets AllLatency() const;
};

class alignas(64) QueueStats {
 public:
  void Add(Counter c, uint64_t n = 1) {
    values_[Index(c)].fetch_add(n, std::memory_order_relaxed);
  }
  // For gauges only.
  void Sub(Counter c, uint64_t n = 1) {
    values_[Index(c)].fetch_sub(n, std::memory_order_relaxed);
  }
  // For kMax counters: raises the stored value to `value` if it is higher.
  void RaiseMax(Counter c, uint64_t value) {
    auto& slot = values_[Index(c)];
    uint64_t seen = slot.load(std::memory_order_relaxed);
    while (value > seen && !slot.compare_exchange_weak(
                               seen, value, std::memory_order_relaxed)) {
    }
  }
  // One answered FUSE request and its latency, from its arrival to its
  // reply: counted (reads_done or writes_done), summed (read_lat_ns or
  // write_lat_ns, for the average) and recorded in the direction's histogram
  // (for percentiles).
  void RecordLatency(Direction direction, uint64_t nanoseconds) {
    bool read = direction == Direction::kRead;
    Add(read ? Counter::reads_done : Counter::writes_done);
    Add(read ? Counter::read_lat_ns : Counter::write_lat_ns, nanoseconds);
    (read ? read_latency_ : write_latency_).Record(nanoseconds);
  }

  QueueSnapshot Snapshot() const;

  // Zeroes counts, the latency histograms and maxima; leaves gauges alone
  // (requests in flight are still in flight) and restarts inflight_max from
  // the current inflight.
  void Reset();

 private:
  std::array<std::atomic<uint64_t>, kNumCounters> values_{};
  LatencyHistogram read_latency_;
  LatencyHistogram write_latency_;
};

// Combines queue snapshots into a total row: counts and gauges add, maxima
// take the highest, latency histograms merge.
QueueSnapshot Total(const QueueSnapshot* snapshots, size_t count);

}  // namespace pvdisk::stats
