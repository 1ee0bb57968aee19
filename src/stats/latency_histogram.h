// A lock-free latency histogram with log-linear buckets: each power of two is
// split into 128 sub-buckets, so a bucket is less than 1% wide (1/128 of its
// lower bound) and a percentile, reported as its bucket's upper bound, is
// within 0.8% of the true sample. Values below 128 ns get a bucket each;
// the buckets reach 2^34 ns (17.2 s), and anything longer is counted in the
// last bucket. This covers 1 us to 10 s at 1% accuracy.
// Recording is one relaxed atomic increment, so any thread may record.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace pvdisk::stats {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;
  // Octave `e` (e >= 1) holds values whose top bit is e + kSubBucketBits - 1;
  // the last one ends at 2^(kMaxExponent + kSubBucketBits) ns = 2^34 ns.
  static constexpr int kMaxExponent = 27;
  static constexpr int kNumBuckets = (kMaxExponent + 1) * kSubBuckets;
  using Buckets = std::array<uint64_t, kNumBuckets>;

  // Records one sample of `nanoseconds`. Thread-safe.
  void Record(uint64_t nanoseconds) {
    counts_[BucketOf(nanoseconds)].fetch_add(1, std::memory_order_relaxed);
  }

  // Copies the counts. Concurrent Record() calls may or may not be included.
  Buckets Snapshot() const;
  void Reset();

  // The bucket that holds `nanoseconds`; the smallest and the largest value
  // in bucket `b`.
  static int BucketOf(uint64_t nanoseconds);
  static uint64_t LowerBound(int bucket);
  static uint64_t UpperBound(int bucket);

  // The number of samples in `buckets`.
  static uint64_t Count(const Buckets& buckets);

  // The value (in ns) below which `fraction` (0..1] of the samples lie: the
  // upper bound of the bucket where that rank falls. 0 when there are none.
  static uint64_t Percentile(const Buckets& buckets, double fraction);

 private:
  std::array<std::atomic<uint64_t>, kNumBuckets> counts_{};
};

}  // namespace pvdisk::stats
