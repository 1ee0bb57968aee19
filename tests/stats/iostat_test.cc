// The arithmetic of `pvdisk stat`'s columns on hand-made snapshots.
#include "stats/iostat.h"

#include <string_view>

#include "gtest/gtest.h"

namespace pvdisk::stats {
namespace {

double Column(const std::vector<double>& row, std::string_view name) {
  for (size_t c = 0; c < kNumIostatColumns; ++c) {
    if (kIostatColumns[c].name == name) return row[c];
  }
  ADD_FAILURE() << "no column " << name;
  return -1;
}

QueueSnapshot With(std::initializer_list<std::pair<Counter, uint64_t>> set) {
  QueueSnapshot s;
  for (const auto& [c, v] : set) s.values[Index(c)] = v;
  return s;
}

constexpr uint64_t kTwoSeconds = 2'000'000'000;

TEST(IostatTest, RatesSizesMergesAndAwaitsOverTheInterval) {
  QueueSnapshot before = With({{Counter::reqs_read, 100},
                               {Counter::reads_done, 100},
                               {Counter::read_lat_ns, 50'000'000}});
  QueueSnapshot after = With({
      {Counter::reqs_read, 300},            // +200 in 2 s
      {Counter::reqs_write, 50},            // +50
      {Counter::sectors_read, 200 * 8},     // 4 KiB each
      {Counter::sectors_written, 50 * 16},  // 8 KiB each
      {Counter::merges_read, 0},
      {Counter::merges_write, 50},  // as many merged as sent
      {Counter::fuse_reads, 200},
      {Counter::fuse_writes, 100},
      {Counter::reads_done, 300},           // +200
      {Counter::read_lat_ns, 450'000'000},  // +400 ms over 200: 2 ms each
      {Counter::writes_done, 100},
      {Counter::write_lat_ns, 100'000'000},   // 1 ms each
      {Counter::inflight_ns, 3'000'000'000},  // 1.5 in flight on average
      {Counter::kicks_sent, 125},
      {Counter::irqs_sent, 250},
      {Counter::ring_full, 10},
      {Counter::splits, 4},
      {Counter::errors, 3},
      {Counter::invalid_reqs, 1},
  });
  std::vector<double> row = IostatRow(before, after, kTwoSeconds);
  ASSERT_EQ(row.size(), kNumIostatColumns);
  EXPECT_DOUBLE_EQ(Column(row, "r/s"), 100);
  EXPECT_DOUBLE_EQ(Column(row, "w/s"), 25);
  EXPECT_DOUBLE_EQ(Column(row, "rMB/s"), 200 * 4.0 / 1024 / 2);
  EXPECT_DOUBLE_EQ(Column(row, "wMB/s"), 50 * 8.0 / 1024 / 2);
  EXPECT_DOUBLE_EQ(Column(row, "rrqm/s"), 0);
  EXPECT_DOUBLE_EQ(Column(row, "wrqm/s"), 25);
  EXPECT_DOUBLE_EQ(Column(row, "%rrqm"), 0);
  EXPECT_DOUBLE_EQ(Column(row, "%wrqm"), 50);
  EXPECT_DOUBLE_EQ(Column(row, "rareq-sz"), 4);
  EXPECT_DOUBLE_EQ(Column(row, "wareq-sz"), 8);
  EXPECT_DOUBLE_EQ(Column(row, "r_await"), 2);
  EXPECT_DOUBLE_EQ(Column(row, "w_await"), 1);
  EXPECT_DOUBLE_EQ(Column(row, "aqu-sz"), 1.5);
  EXPECT_DOUBLE_EQ(Column(row, "ring/req"), 250.0 / 300);
  EXPECT_DOUBLE_EQ(Column(row, "kicks/req"), 0.5);
  EXPECT_DOUBLE_EQ(Column(row, "irqs/req"), 1);
  EXPECT_DOUBLE_EQ(Column(row, "ring_full/s"), 5);
  EXPECT_DOUBLE_EQ(Column(row, "splits/s"), 2);
  EXPECT_DOUBLE_EQ(Column(row, "errors"), 3);
  EXPECT_DOUBLE_EQ(Column(row, "invalid"), 1);
}

TEST(IostatTest, VolatileCacheColumns) {
  // The gauges are the interval's end, the counts rates over it.
  QueueSnapshot before = With({{Counter::flushes, 10},
                               {Counter::full_flushes, 4},
                               {Counter::full_waits, 1}});
  QueueSnapshot after = With({{Counter::unsafe_bytes, 3 << 20},
                              {Counter::unsafe_bytes_max, 8 << 20},
                              {Counter::flushes, 30},
                              {Counter::full_flushes, 8},
                              {Counter::full_waits, 3}});
  std::vector<double> row = IostatRow(before, after, 2'000'000'000);
  EXPECT_DOUBLE_EQ(Column(row, "unsafe_MB"), 3);
  EXPECT_DOUBLE_EQ(Column(row, "unsafe_maxMB"), 8);
  EXPECT_DOUBLE_EQ(Column(row, "wout/s"), 10);
  EXPECT_DOUBLE_EQ(Column(row, "full/s"), 2);
  EXPECT_DOUBLE_EQ(Column(row, "fwait/s"), 1);
}

TEST(IostatTest, NothingToDivideByGivesZero) {
  QueueSnapshot zero;
  std::vector<double> row = IostatRow(zero, zero, 0);
  for (size_t c = 0; c < kNumIostatColumns; ++c) {
    EXPECT_EQ(row[c], 0) << kIostatColumns[c].name;
  }
}

TEST(IostatTest, CountsThatWentDownCountFromZero) {
  // A reset between the snapshots: the new counts are the interval's.
  QueueSnapshot before = With({{Counter::reqs_read, 1000}});
  QueueSnapshot after = With({{Counter::reqs_read, 10}});
  EXPECT_DOUBLE_EQ(Column(IostatRow(before, after, 1'000'000'000), "r/s"), 10);
}

TEST(IostatTest, P99IsTheIntervalsOwn) {
  QueueStats stats;
  for (int i = 0; i < 1000; ++i)
    stats.RecordLatency(Direction::kRead, 50'000'000);
  QueueSnapshot before = stats.Snapshot();  // 1000 slow reads: 50 ms
  for (int i = 0; i < 100; ++i)
    stats.RecordLatency(Direction::kRead, 1'000'000);
  QueueSnapshot after = stats.Snapshot();  // then 100 fast ones: 1 ms
  std::vector<double> row = IostatRow(before, after, 1'000'000'000);
  EXPECT_GE(Column(row, "r_p99"), 1.0);
  EXPECT_LE(Column(row, "r_p99"), 1.01);
  EXPECT_DOUBLE_EQ(Column(row, "r_await"), 1.0);
  EXPECT_EQ(Column(row, "w_p99"), 0);
}

}  // namespace
}  // namespace pvdisk::stats
