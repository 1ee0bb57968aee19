#include "stats/queue_stats.h"

#include <algorithm>

namespace pvdisk::stats {

LatencyHistogram::Buckets QueueSnapshot::AllLatency() const {
  LatencyHistogram::Buckets all = read_latency;
  for (size_t b = 0; b < all.size(); ++b) all[b] += write_latency[b];
  return all;
}

QueueSnapshot QueueStats::Snapshot() const {
  QueueSnapshot out;
  for (size_t i = 0; i < kNumCounters; ++i) {
    out.values[i] = values_[i].load(std::memory_order_relaxed);
  }
  out.read_latency = read_latency_.Snapshot();
  out.write_latency = write_latency_.Snapshot();
  return out;
}

void QueueStats::Reset() {
  for (size_t i = 0; i < kNumCounters; ++i) {
    if (kCounterInfo[i].kind != CounterKind::kGauge) {
      values_[i].store(0, std::memory_order_relaxed);
    }
  }
  values_[Index(Counter::inflight_max)].store(
      values_[Index(Counter::inflight)].load(std::memory_order_relaxed),
      std::memory_order_relaxed);
  read_latency_.Reset();
  write_latency_.Reset();
}

QueueSnapshot Total(const QueueSnapshot* snapshots, size_t count) {
  QueueSnapshot total;
  for (size_t q = 0; q < count; ++q) {
    for (size_t i = 0; i < kNumCounters; ++i) {
      uint64_t v = snapshots[q].values[i];
      if (kCounterInfo[i].kind == CounterKind::kMax) {
        total.values[i] = std::max(total.values[i], v);
      } else {
        total.values[i] += v;
      }
    }
    for (size_t b = 0; b < LatencyHistogram::kNumBuckets; ++b) {
      total.read_latency[b] += snapshots[q].read_latency[b];
      total.write_latency[b] += snapshots[q].write_latency[b];
    }
  }
  return total;
}

}  // namespace pvdisk::stats
