// A lock-free latency histogram with log-linear buckets: each power of two is
// split into 8 sub-buckets, so a percentile is within 12.5% of the truth,
// from 1 ns to about 2^40 ns (18 minutes). Recording is one relaxed atomic
// increment, so any thread may record.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace pvdisk::stats {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 3;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;
  static constexpr int kMaxExponent = 40;
  static constexpr int kNumBuckets = (kMaxExponent + 1) * kSubBuckets;
  using Buckets = std::array<uint64_t, kNumBuckets>;

  // Records one sample of `nanoseconds`. Thread-safe.
  void Record(uint64_t nanoseconds) {
    counts_[BucketOf(nanoseconds)].fetch_add(1, std::memory_order_relaxed);
  }

  // Copies the counts. Concurrent Record() calls may or may not be included.
  Buckets Snapshot() const;
  void Reset();

  // The bucket that holds `nanoseconds`, and the largest value in bucket `b`.
  static int BucketOf(uint64_t nanoseconds);
  static uint64_t UpperBound(int bucket);

  // The value (in ns) below which `fraction` (0..1] of the samples lie: the
  // upper bound of the bucket where that rank falls. 0 when there are none.
  static uint64_t Percentile(const Buckets& buckets, double fraction);

 private:
  std::array<std::atomic<uint64_t>, kNumBuckets> counts_{};
};

}  // namespace pvdisk::stats
