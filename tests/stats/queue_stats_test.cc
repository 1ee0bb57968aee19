#include "stats/queue_stats.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::stats {
namespace {

uint64_t LatencyCount(const QueueSnapshot& snapshot) {
  return LatencyHistogram::Count(snapshot.AllLatency());
}

TEST(QueueStatsTest, StartsAtZero) {
  QueueStats stats;
  QueueSnapshot snapshot = stats.Snapshot();
  for (size_t i = 0; i < kNumCounters; ++i) {
    EXPECT_EQ(snapshot.values[i], 0u) << kCounterInfo[i].name;
  }
  EXPECT_EQ(LatencyCount(snapshot), 0u);
}

TEST(QueueStatsTest, AddSubAndRaiseMax) {
  QueueStats stats;
  stats.Add(Counter::reqs_read);
  stats.Add(Counter::reqs_read);
  stats.Add(Counter::sectors_read, 16);
  stats.Add(Counter::inflight, 5);
  stats.Sub(Counter::inflight);
  stats.Sub(Counter::inflight, 2);
  stats.RaiseMax(Counter::inflight_max, 7);
  stats.RaiseMax(Counter::inflight_max, 3);  // lower: ignored
  stats.RaiseMax(Counter::engine_inflight_max, 2);
  stats.RaiseMax(Counter::engine_inflight_max, 9);

  QueueSnapshot snapshot = stats.Snapshot();
  EXPECT_EQ(snapshot.Get(Counter::reqs_read), 2u);
  EXPECT_EQ(snapshot.Get(Counter::sectors_read), 16u);
  EXPECT_EQ(snapshot.Get(Counter::inflight), 2u);
  EXPECT_EQ(snapshot.Get(Counter::inflight_max), 7u);
  EXPECT_EQ(snapshot.Get(Counter::engine_inflight_max), 9u);
  EXPECT_EQ(snapshot.Get(Counter::reqs_write), 0u);
}

TEST(QueueStatsTest, RecordLatencyShowsInSnapshot) {
  QueueStats stats;
  stats.RecordLatency(Direction::kRead, 10'000);
  stats.RecordLatency(Direction::kWrite, 20'000);
  stats.RecordLatency(Direction::kWrite, 30'000);
  QueueSnapshot snapshot = stats.Snapshot();
  EXPECT_EQ(LatencyCount(snapshot), 3u);
  EXPECT_EQ(snapshot.read_latency[LatencyHistogram::BucketOf(10'000)], 1u);
  EXPECT_EQ(LatencyHistogram::Count(snapshot.read_latency), 1u);
  EXPECT_EQ(snapshot.write_latency[LatencyHistogram::BucketOf(20'000)], 1u);
  EXPECT_EQ(LatencyHistogram::Count(snapshot.write_latency), 2u);
  // Counted and summed per direction, for the await columns.
  EXPECT_EQ(snapshot.Get(Counter::reads_done), 1u);
  EXPECT_EQ(snapshot.Get(Counter::read_lat_ns), 10'000u);
  EXPECT_EQ(snapshot.Get(Counter::writes_done), 2u);
  EXPECT_EQ(snapshot.Get(Counter::write_lat_ns), 50'000u);
}

TEST(QueueStatsTest, ResetKeepsGaugesAndRestartsInflightMax) {
  QueueStats stats;
  stats.Add(Counter::fuse_reads, 10);
  stats.Add(Counter::errors, 3);
  stats.Add(Counter::inflight, 4);
  stats.RaiseMax(Counter::inflight_max, 30);
  stats.RaiseMax(Counter::engine_inflight_max, 12);
  stats.RecordLatency(Direction::kRead, 5'000);

  stats.Reset();
  QueueSnapshot snapshot = stats.Snapshot();
  EXPECT_EQ(snapshot.Get(Counter::fuse_reads), 0u);
  EXPECT_EQ(snapshot.Get(Counter::errors), 0u);
  EXPECT_EQ(snapshot.Get(Counter::inflight), 4u);  // still in flight
  EXPECT_EQ(snapshot.Get(Counter::inflight_max), 4u);
  EXPECT_EQ(snapshot.Get(Counter::engine_inflight_max), 0u);
  EXPECT_EQ(LatencyCount(snapshot), 0u);

  // The in-flight requests complete after the reset: the gauge returns to
  // zero instead of wrapping below it.
  stats.Sub(Counter::inflight, 4);
  EXPECT_EQ(stats.Snapshot().Get(Counter::inflight), 0u);
  EXPECT_EQ(stats.Snapshot().Get(Counter::inflight_max), 4u);
}

TEST(QueueStatsTest, ConcurrentAddsSumExactly) {
  QueueStats stats;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&stats, t] {
      for (int i = 0; i < kPerThread; ++i) {
        stats.Add(Counter::reqs_write);
        stats.Add(Counter::sectors_written, 8);
        stats.Add(Counter::inflight);
        stats.RaiseMax(Counter::inflight_max,
                       static_cast<uint64_t>(t * kPerThread + i));
        stats.Sub(Counter::inflight);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  QueueSnapshot snapshot = stats.Snapshot();
  EXPECT_EQ(snapshot.Get(Counter::reqs_write), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(snapshot.Get(Counter::sectors_written),
            uint64_t{kThreads} * kPerThread * 8);
  EXPECT_EQ(snapshot.Get(Counter::inflight), 0u);
  EXPECT_EQ(snapshot.Get(Counter::inflight_max),
            uint64_t{kThreads} * kPerThread - 1);
}

TEST(QueueStatsTest, TotalSumsCountsAndGaugesAndMaxesMaxima) {
  QueueStats a;
  QueueStats b;
  a.Add(Counter::reqs_read, 3);
  b.Add(Counter::reqs_read, 4);
  a.Add(Counter::inflight, 2);
  b.Add(Counter::inflight, 5);
  a.RaiseMax(Counter::inflight_max, 10);
  b.RaiseMax(Counter::inflight_max, 6);
  a.RaiseMax(Counter::engine_inflight_max, 1);
  b.RaiseMax(Counter::engine_inflight_max, 8);
  a.RecordLatency(Direction::kRead, 1'000);
  b.RecordLatency(Direction::kRead, 1'000);
  b.RecordLatency(Direction::kWrite, 2'000'000);

  QueueSnapshot snapshots[] = {a.Snapshot(), b.Snapshot()};
  QueueSnapshot total = Total(snapshots, 2);
  EXPECT_EQ(total.Get(Counter::reqs_read), 7u);
  EXPECT_EQ(total.Get(Counter::inflight), 7u);
  EXPECT_EQ(total.Get(Counter::inflight_max), 10u);
  EXPECT_EQ(total.Get(Counter::engine_inflight_max), 8u);
  EXPECT_EQ(total.Get(Counter::errors), 0u);
  EXPECT_EQ(LatencyCount(total), 3u);
  EXPECT_EQ(total.read_latency[LatencyHistogram::BucketOf(1'000)], 2u);
  EXPECT_EQ(total.write_latency[LatencyHistogram::BucketOf(2'000'000)], 1u);
  EXPECT_EQ(total.Get(Counter::reads_done), 2u);
  EXPECT_EQ(total.Get(Counter::write_lat_ns), 2'000'000u);
}

TEST(QueueStatsTest, TotalOfNothingIsZero) {
  QueueSnapshot total = Total(nullptr, 0);
  for (uint64_t v : total.values) EXPECT_EQ(v, 0u);
  EXPECT_EQ(LatencyCount(total), 0u);
}

}  // namespace
}  // namespace pvdisk::stats
