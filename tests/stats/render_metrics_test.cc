#include "stats/render_metrics.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "stats/counters.h"
#include "stats/latency_histogram.h"
#include "stats/queue_stats.h"

namespace pvdisk::stats {
namespace {

// A snapshot with every counter distinct and both histograms filled.
QueueSnapshot Sample(uint64_t seed) {
  QueueSnapshot snapshot;
  for (size_t i = 0; i < kNumCounters; ++i) {
    snapshot.values[i] = seed * 1000 + i * 7 + 1;
  }
  const uint64_t latencies[] = {90,    999,     1000,          1003,
                                4'000, 250'000, 3'000'000'000, 20'000'000'000};
  uint64_t sum = 0;
  for (uint64_t ns : latencies) {
    ++snapshot.read_latency[LatencyHistogram::BucketOf(ns)];
    sum += ns;
  }
  snapshot.values[Index(Counter::read_lat_ns)] = sum;
  snapshot.values[Index(Counter::reads_done)] = std::size(latencies);
  ++snapshot.write_latency[LatencyHistogram::BucketOf(12'345)];
  return snapshot;
}

// "name{labels}" -> value, and the # TYPE of each family.
struct Parsed {
  std::map<std::string, std::string> samples;
  std::map<std::string, std::string> types;
  std::vector<std::string> order;  // sample keys as they come
};

Parsed Parse(const std::string& text) {
  Parsed parsed;
  std::vector<std::string> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    if (words[0] == "#") {
      if (words[1] == "TYPE") parsed.types[words[2]] = words[3];
      continue;
    }
    size_t space = line.rfind(' ');
    std::string key = line.substr(0, space);
    parsed.samples[key] = line.substr(space + 1);
    parsed.order.push_back(key);
  }
  return parsed;
}

std::string Key(const std::string& name, const std::string& disk, int queue,
                const std::string& extra = "") {
  return absl::StrCat(name, "{disk=\"", disk, "\",queue=\"", queue, "\"", extra,
                      "}");
}

TEST(RenderMetricsTest, SecondsAreExactDecimals) {
  EXPECT_EQ(SecondsText(0), "0");
  EXPECT_EQ(SecondsText(1), "0.000000001");
  EXPECT_EQ(SecondsText(12'345), "0.000012345");
  EXPECT_EQ(SecondsText(1'500'000'000), "1.5");
  EXPECT_EQ(SecondsText(3'000'000'000), "3");
  EXPECT_EQ(SecondsText(18'446'744'073'709'551'615u), "18446744073.709551615");
}

TEST(RenderMetricsTest, NodeExporterNamesAndUnits) {
  EXPECT_EQ(MetricFor(Counter::reads_done).name,
            "pvdisk_disk_reads_completed_total");
  EXPECT_EQ(MetricFor(Counter::writes_done).name,
            "pvdisk_disk_writes_completed_total");
  EXPECT_EQ(MetricFor(Counter::sectors_read).name,
            "pvdisk_disk_read_bytes_total");
  EXPECT_EQ(MetricFor(Counter::sectors_read).scale, 512u);
  EXPECT_EQ(MetricFor(Counter::sectors_written).name,
            "pvdisk_disk_written_bytes_total");
  EXPECT_EQ(MetricFor(Counter::read_lat_ns).name,
            "pvdisk_disk_read_time_seconds_total");
  EXPECT_TRUE(MetricFor(Counter::read_lat_ns).nanoseconds_to_seconds);
  EXPECT_EQ(MetricFor(Counter::write_lat_ns).name,
            "pvdisk_disk_write_time_seconds_total");
  EXPECT_EQ(MetricFor(Counter::merges_read).name,
            "pvdisk_disk_reads_merged_total");
  EXPECT_EQ(MetricFor(Counter::inflight).name, "pvdisk_disk_io_now");
  EXPECT_FALSE(MetricFor(Counter::inflight).counter);
  EXPECT_EQ(MetricFor(Counter::inflight_ns).name,
            "pvdisk_disk_io_time_weighted_seconds_total");
  // pvdisk's own: counts are counters with _total, the rest gauges.
  EXPECT_EQ(MetricFor(Counter::kicks_suppressed).name,
            "pvdisk_kicks_suppressed_total");
  EXPECT_EQ(MetricFor(Counter::inflight_max).name, "pvdisk_inflight_max");
  EXPECT_FALSE(MetricFor(Counter::inflight_max).counter);
}

// Every counter of counters.h is in the file, once per queue, with its
// value in its metric's unit, and under a family of the right TYPE.
TEST(RenderMetricsTest, EveryCounterOfEveryQueue) {
  DiskReport disk{"d\"isk0.img", {}, {Sample(1), Sample(2)}};
  Parsed parsed = Parse(RenderMetrics({disk}));
  std::set<std::string> names;
  for (size_t i = 0; i < kNumCounters; ++i) {
    MetricName metric = MetricFor(static_cast<Counter>(i));
    EXPECT_TRUE(names.insert(metric.name).second) << metric.name;
    EXPECT_EQ(parsed.types[metric.name], metric.counter ? "counter" : "gauge")
        << metric.name;
    EXPECT_EQ(metric.counter, kCounterInfo[i].kind == CounterKind::kCount);
    if (metric.counter) {
      EXPECT_TRUE(metric.name.ends_with("_total")) << metric.name;
    }
    for (int q = 0; q < 2; ++q) {
      uint64_t value = disk.queues[q].values[i];
      std::string want = metric.nanoseconds_to_seconds
                             ? SecondsText(value)
                             : absl::StrCat(value * metric.scale);
      EXPECT_EQ(parsed.samples[Key(metric.name, "d\\\"isk0.img", q)], want)
          << metric.name << " queue " << q;
    }
  }
}

TEST(RenderMetricsTest, HistogramsAreCumulativeAndExact) {
  QueueSnapshot sample = Sample(3);
  DiskReport disk{"disk0.img", {}, {sample}};
  Parsed parsed = Parse(RenderMetrics({disk}));
  EXPECT_EQ(parsed.types["pvdisk_read_latency_seconds"], "histogram");
  EXPECT_EQ(parsed.types["pvdisk_write_latency_seconds"], "histogram");
  const std::string name = "pvdisk_read_latency_seconds";
  uint64_t previous = 0;
  for (uint64_t bound : MetricBucketBounds()) {
    std::string key = Key(name + "_bucket", "disk0.img", 0,
                          absl::StrCat(",le=\"", SecondsText(bound), "\""));
    ASSERT_TRUE(parsed.samples.count(key)) << key;
    uint64_t count = 0;
    ASSERT_TRUE(absl::SimpleAtoi(parsed.samples[key], &count));
    // Counted directly from the samples' buckets: those wholly <= bound.
    uint64_t want = 0;
    for (int b = 0; b < LatencyHistogram::kNumBuckets; ++b) {
      if (LatencyHistogram::UpperBound(b) <= bound)
        want += sample.read_latency[b];
    }
    EXPECT_EQ(count, want) << key;
    EXPECT_GE(count, previous);
    previous = count;
  }
  // 90 ns, 999 ns, 1000 ns and 1003 ns are within the first bucket (1 us).
  EXPECT_EQ(
      parsed.samples[Key(
          name + "_bucket", "disk0.img", 0,
          absl::StrCat(",le=\"", SecondsText(MetricBucketBounds()[0]), "\""))],
      "4");
  EXPECT_EQ(
      parsed.samples[Key(name + "_bucket", "disk0.img", 0, ",le=\"+Inf\"")],
      "8");
  EXPECT_EQ(parsed.samples[Key(name + "_count", "disk0.img", 0)], "8");
  EXPECT_EQ(parsed.samples[Key(name + "_sum", "disk0.img", 0)],
            SecondsText(sample.Get(Counter::read_lat_ns)));
  // 20 s is beyond the last finite bucket: only +Inf has it.
  EXPECT_EQ(previous, 7u);
}

TEST(RenderMetricsTest, BucketBoundsAreBucketEndsNearRoundValues) {
  std::vector<uint64_t> bounds = MetricBucketBounds();
  ASSERT_EQ(bounds.size(), 22u);  // 1 us .. 5 s in 1-2-5 steps, then 10 s
  uint64_t round = 1000;
  for (size_t i = 0; i < bounds.size(); ++i) {
    const uint64_t steps[] = {1, 2, 5};
    uint64_t target = round * steps[i % 3];
    if (i % 3 == 2) round *= 10;
    EXPECT_EQ(bounds[i], LatencyHistogram::UpperBound(
                             LatencyHistogram::BucketOf(bounds[i])));
    EXPECT_GE(bounds[i], target);
    EXPECT_LE(static_cast<double>(bounds[i]), target * 1.008) << target;
  }
}

// Debian's promtool (the prometheus package) accepts the file as it is.
TEST(RenderMetricsTest, PromtoolAcceptsIt) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (scripts/install-deps.sh)";
  }
  DiskReport a{"disk0.img", {}, {Sample(1), Sample(2)}};
  DiskReport b{"b\\disk\".img", {}, {Sample(4)}};
  std::string path = (std::filesystem::temp_directory_path() /
                      absl::StrCat("render_metrics_test.", getpid(), ".prom"))
                         .string();
  {
    std::ofstream out(path);
    out << RenderMetrics({a, b});
  }
  std::string output = path + ".out";
  int status = std::system(
      absl::StrCat("promtool check metrics < ", path, " > ", output, " 2>&1")
          .c_str());
  std::ifstream in(output);
  std::string said((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  std::filesystem::remove(output);
  EXPECT_EQ(status, 0) << said;
  EXPECT_EQ(said, "") << "promtool's lint found problems";
}

}  // namespace
}  // namespace pvdisk::stats
