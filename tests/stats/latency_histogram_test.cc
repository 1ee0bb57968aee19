#include "stats/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
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
    if (b == Histogram::kNumBuckets - 1) continue;  // overflow: see below
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

TEST(LatencyHistogramTest, BucketWidthWithinOnePercentUpToTenSeconds) {
  for (uint64_t v : InterestingValues()) {
    if (v > 10'000'000'000) continue;  // 10 s
    int b = Histogram::BucketOf(v);
    uint64_t lower = Histogram::LowerBound(b);
    uint64_t upper = Histogram::UpperBound(b);
    EXPECT_LE(lower, v) << v;
    EXPECT_LE(upper - v, v / 100) << v;
    EXPECT_LE(upper - lower, lower / 100) << v;  // the bucket, not only v
  }
}

TEST(LatencyHistogramTest, BucketBoundaries) {
  // Below 128 ns one bucket per value.
  for (uint64_t v = 0; v < 128; ++v) {
    EXPECT_EQ(Histogram::BucketOf(v), static_cast<int>(v));
    EXPECT_EQ(Histogram::LowerBound(static_cast<int>(v)), v);
    EXPECT_EQ(Histogram::UpperBound(static_cast<int>(v)), v);
  }
  // The octave [128, 256) still has width-1 buckets; [256, 512) width 2.
  EXPECT_EQ(Histogram::BucketOf(128), 128);
  EXPECT_EQ(Histogram::BucketOf(255), 255);
  EXPECT_EQ(Histogram::BucketOf(256), 256);
  EXPECT_EQ(Histogram::BucketOf(257), 256);
  EXPECT_EQ(Histogram::BucketOf(258), 257);
  EXPECT_EQ(Histogram::LowerBound(256), 256u);
  EXPECT_EQ(Histogram::UpperBound(256), 257u);
  // 1 us = 1000 ns: octave [512, 1024) has buckets 4 wide from 512.
  EXPECT_EQ(Histogram::LowerBound(Histogram::BucketOf(1000)), 1000u);
  EXPECT_EQ(Histogram::UpperBound(Histogram::BucketOf(1000)), 1003u);
  // Every bucket starts right after the previous one ends.
  for (int b = 1; b < Histogram::kNumBuckets; ++b) {
    ASSERT_EQ(Histogram::LowerBound(b), Histogram::UpperBound(b - 1) + 1) << b;
  }
  // 10 s is tracked; from 2^34 ns (17.2 s) on everything is the last bucket.
  EXPECT_LT(Histogram::BucketOf(10'000'000'000), Histogram::kNumBuckets - 1);
  EXPECT_EQ(Histogram::UpperBound(Histogram::kNumBuckets - 1),
            (uint64_t{1} << 34) - 1);
  EXPECT_EQ(Histogram::BucketOf(uint64_t{1} << 34), Histogram::kNumBuckets - 1);
}

// Percentiles of a histogram against the same percentiles of the sorted
// samples: the histogram's answer is the upper bound of the bucket holding
// the sample of that rank, so never below it and at most 1% above.
TEST(LatencyHistogramTest, PercentilesMatchSortedSamplesWithinOnePercent) {
  std::mt19937_64 random(14);
  // Log-uniform from 1 us to 10 s, as latencies spread.
  std::uniform_real_distribution<double> exponent(3.0, 10.0);
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{100'000}}) {
    Histogram histogram;
    std::vector<uint64_t> samples;
    for (size_t i = 0; i < n; ++i) {
      uint64_t v = static_cast<uint64_t>(std::pow(10.0, exponent(random)));
      samples.push_back(v);
      histogram.Record(v);
    }
    std::sort(samples.begin(), samples.end());
    Histogram::Buckets buckets = histogram.Snapshot();
    EXPECT_EQ(Histogram::Count(buckets), n);
    for (double fraction : {0.5, 0.9, 0.99, 0.999, 1.0}) {
      size_t rank = static_cast<size_t>(std::ceil(fraction * n));
      uint64_t truth = samples[std::max<size_t>(rank, 1) - 1];
      uint64_t got = Histogram::Percentile(buckets, fraction);
      EXPECT_GE(got, truth) << "n=" << n << " p=" << fraction;
      EXPECT_LE(got, truth + truth / 100) << "n=" << n << " p=" << fraction;
    }
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
  EXPECT_LE(p50, 10'100u);  // within 1%
  uint64_t p99 = Histogram::Percentile(buckets, 0.99);
  EXPECT_GE(p99, 10'000u);
  EXPECT_LE(p99, 10'100u);
  uint64_t p100 = Histogram::Percentile(buckets, 1.0);
  EXPECT_GE(p100, 10'000'000u);
  EXPECT_LE(p100, 10'100'000u);
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
