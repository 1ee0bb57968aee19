#include "stats/latency_histogram.h"

#include <bit>

namespace pvdisk::stats {

int LatencyHistogram::BucketOf(uint64_t nanoseconds) {
  // Values below kSubBuckets get one bucket each; above, the exponent picks
  // the octave and the kSubBucketBits bits below the top bit pick the
  // sub-bucket inside it.
  if (nanoseconds < kSubBuckets) return static_cast<int>(nanoseconds);
  int top_bit = 63 - std::countl_zero(nanoseconds);
  int exponent = top_bit - kSubBucketBits + 1;
  if (exponent > kMaxExponent) return kNumBuckets - 1;
  int sub = static_cast<int>((nanoseconds >> (top_bit - kSubBucketBits)) &
                             (kSubBuckets - 1));
  return exponent * kSubBuckets + sub;
}

uint64_t LatencyHistogram::LowerBound(int bucket) {
  int exponent = bucket / kSubBuckets;
  uint64_t sub = static_cast<uint64_t>(bucket % kSubBuckets);
  if (exponent == 0) return sub;
  // Bucket covers [(kSubBuckets + sub) << shift, (kSubBuckets + sub + 1) <<
  // shift).
  return (kSubBuckets + sub) << (exponent - 1);
}

uint64_t LatencyHistogram::UpperBound(int bucket) {
  int exponent = bucket / kSubBuckets;
  uint64_t sub = static_cast<uint64_t>(bucket % kSubBuckets);
  if (exponent == 0) return sub;
  return ((kSubBuckets + sub + 1) << (exponent - 1)) - 1;
}

uint64_t LatencyHistogram::Count(const Buckets& buckets) {
  uint64_t total = 0;
  for (uint64_t c : buckets) total += c;
  return total;
}

LatencyHistogram::Buckets LatencyHistogram::Snapshot() const {
  Buckets out{};
  for (int i = 0; i < kNumBuckets; ++i) {
    out[i] = counts_[i].load(std::memory_order_relaxed);
  }
  return out;
}

void LatencyHistogram::Reset() {
  for (auto& c : counts_) c.store(0, std::memory_order_relaxed);
}

uint64_t LatencyHistogram::Percentile(const Buckets& buckets, double fraction) {
  uint64_t total = Count(buckets);
  if (total == 0) return 0;
  // Rank of the sample we want, 1-based: ceil(fraction * total).
  double wanted = fraction * static_cast<double>(total);
  uint64_t rank = static_cast<uint64_t>(wanted);
  if (static_cast<double>(rank) < wanted) ++rank;
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (int i = 0; i < kNumBuckets; ++i) {
    seen += buckets[i];
    if (seen >= rank) return UpperBound(i);
  }
  return UpperBound(kNumBuckets - 1);
}

}  // namespace pvdisk::stats
