#include "stats/latency_histogram.h"

#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::stats {
namespace {

using Histogram = LatencyHistogram;

std::vector<uint64_t> InterestingValues() {
  std::vector<uint64_t> values;
  for (uint64_t v = 0; v <= 100; ++v) values.push_back(v);
  for (int bit = 1; bit <= 40; ++bit) {
    uint64_t p = uint64_t{1} << bit;
    values.push_back(p - 1);
    values.push_back(p);
    values.push_back(p + 1);
    values.push_back(p + p / 3);  // somewhere inside the octave
  }
  for (uint64_t v : {uint64_t{999}, uint64_t{1000}, uint64_t{10000},
                     uint64_t{123456789}, uint64_t{10000000000}}) {
    values.push_back(v);
  }
  return values;
}

TEST(LatencyHistogramTest, BucketOfAndUpperBoundAgree) {
  for (uint64_t v : InterestingValues()) {
    int b = Histogram::BucketOf(v);
    ASSERT_GE(b, 0) << v;
    ASSERT_LT(b, Histogram::kNumBuckets) << v;
    EXPECT_GE(Histogram::UpperBound(b), v) << "v=" << v << " bucket=" << b;
    if (b > 0) {
      EXPECT_LT(Histogram::UpperBound(b - 1), v)
          << "v=" << v << " bucket=" << b;
    }
  }
}

TEST(LatencyHistogramTest, UpperBoundsStrictlyIncreaseAndMapBack) {
  for (int b = 0; b < Histogram::kNumBuckets; ++b) {
    uint64_t upper = Histogram::UpperBound(b);
    // Bucket 8 starts the octave [8, 16); buckets 0..7 hold one value each.
    EXPECT_EQ(Histogram::BucketOf(upper), b) << "bucket " << b;
    if (b > 0) {
      EXPECT_GT(upper, Histogram::UpperBound(b - 1)) << b;
      EXPECT_EQ(Histogram::BucketOf(Histogram::UpperBound(b - 1) + 1), b) << b;
    }
  }
}

TEST(LatencyHistogramTest, BucketWidthWithinOneEighth) {
  for (uint64_t v : InterestingValues()) {
    uint64_t upper = Histogram::UpperBound(Histogram::BucketOf(v));
    EXPECT_LE(upper - v, v / 8) << v;
  }
}

TEST(LatencyHistogramTest, HugeValuesGoToLastBucket) {
  EXPECT_EQ(Histogram::BucketOf(std::numeric_limits<uint64_t>::max()),
            Histogram::kNumBuckets - 1);
  EXPECT_EQ(Histogram::BucketOf(uint64_t{1} << 50), Histogram::kNumBuckets - 1);
  EXPECT_EQ(
      Histogram::BucketOf(Histogram::UpperBound(Histogram::kNumBuckets - 1)),
      Histogram::kNumBuckets - 1);
}

TEST(LatencyHistogramTest, PercentileOfEmptyIsZero) {
  Histogram::Buckets empty{};
  EXPECT_EQ(Histogram::Percentile(empty, 0.5), 0u);
  EXPECT_EQ(Histogram::Percentile(empty, 0.99), 0u);
  EXPECT_EQ(Histogram::Percentile(empty, 1.0), 0u);
}

TEST(LatencyHistogramTest, PercentileOfKnownDistribution) {
  Histogram histogram;
  for (int i = 0; i < 99; ++i) histogram.Record(10'000);  // 10 us
  histogram.Record(10'000'000);                           // 10 ms
  Histogram::Buckets buckets = histogram.Snapshot();

  uint64_t p50 = Histogram::Percentile(buckets, 0.50);
  EXPECT_GE(p50, 10'000u);
  EXPECT_LE(p50, 11'250u);  // within 12.5%
  uint64_t p99 = Histogram::Percentile(buckets, 0.99);
  EXPECT_GE(p99, 10'000u);
  EXPECT_LE(p99, 11'250u);
  uint64_t p100 = Histogram::Percentile(buckets, 1.0);
  EXPECT_GE(p100, 10'000'000u);
  EXPECT_LE(p100, 11'250'000u);
}

TEST(LatencyHistogramTest, PercentileRanksAreCeiled) {
  Histogram::Buckets buckets{};
  // Values 1, 2, 3, 4: one sample each in the exact buckets 1..4.
  for (int v = 1; v <= 4; ++v) buckets[Histogram::BucketOf(v)] += 1;
  EXPECT_EQ(Histogram::Percentile(buckets, 0.0), 1u);   // rank clamps to 1
  EXPECT_EQ(Histogram::Percentile(buckets, 0.25), 1u);  // rank 1
  EXPECT_EQ(Histogram::Percentile(buckets, 0.26), 2u);  // rank ceil(1.04)=2
  EXPECT_EQ(Histogram::Percentile(buckets, 0.5), 2u);
  EXPECT_EQ(Histogram::Percentile(buckets, 0.75), 3u);
  EXPECT_EQ(Histogram::Percentile(buckets, 1.0), 4u);
}

TEST(LatencyHistogramTest, SnapshotCountsAndReset) {
  Histogram histogram;
  histogram.Record(0);
  histogram.Record(5);
  histogram.Record(5);
  histogram.Record(1'000'000);
  Histogram::Buckets buckets = histogram.Snapshot();
  EXPECT_EQ(buckets[0], 1u);
  EXPECT_EQ(buckets[5], 2u);
  EXPECT_EQ(buckets[Histogram::BucketOf(1'000'000)], 1u);
  uint64_t total = 0;
  for (uint64_t c : buckets) total += c;
  EXPECT_EQ(total, 4u);

  histogram.Reset();
  for (uint64_t c : histogram.Snapshot()) ASSERT_EQ(c, 0u);
}

TEST(LatencyHistogramTest, ConcurrentRecordsAreAllCounted) {
  Histogram histogram;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&histogram, t] {
      for (int i = 0; i < kPerThread; ++i) {
        histogram.Record(static_cast<uint64_t>(1000 * (t + 1)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Histogram::Buckets buckets = histogram.Snapshot();
  uint64_t total = 0;
  for (uint64_t c : buckets) total += c;
  EXPECT_EQ(total, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(buckets[Histogram::BucketOf(1000)], uint64_t{kPerThread});
}

}  // namespace
}  // namespace pvdisk::stats
