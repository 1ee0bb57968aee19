// The `metrics` file of a real mount: Debian's promtool accepts it while fio
// loads the disk, and once the load has stopped its counters equal those of
// stats.json and each latency histogram counts the requests answered.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "stats/counters.h"
#include "stats/render_metrics.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// "name{labels}" -> value as written.
std::map<std::string, std::string> Samples(const std::string& text) {
  std::map<std::string, std::string> samples;
  std::vector<std::string> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    if (line[0] == '#') continue;
    size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = line.substr(space + 1);
  }
  return samples;
}

// A decimal number of seconds ("1.5", "0.000012345") in nanoseconds, read
// digit by digit (no floating point, so equality is exact).
uint64_t Nanoseconds(const std::string& seconds) {
  std::vector<std::string> parts = absl::StrSplit(seconds, '.');
  uint64_t whole = 0;
  EXPECT_TRUE(absl::SimpleAtoi(parts[0], &whole)) << seconds;
  std::string fraction = parts.size() > 1 ? parts[1] : "";
  EXPECT_LE(fraction.size(), 9u) << seconds;
  fraction.resize(9, '0');
  uint64_t ns = 0;
  EXPECT_TRUE(absl::SimpleAtoi(fraction, &ns)) << seconds;
  return whole * 1'000'000'000 + ns;
}

// Runs `promtool check metrics` on `text` (it reads stdin); "" if it
// accepted it, else what it said.
std::string PromtoolProblems(const TempDir& dir, const std::string& text) {
  const std::string path = dir.Path("metrics.prom");
  WriteWholeFile(path, text);
  CommandResult checked =
      RunCommand({"sh", "-c", "promtool check metrics < '" + path + "'"});
  if (checked.exit_code == 0 && checked.out.empty() && checked.err.empty()) {
    return "";
  }
  return checked.Describe();
}

TEST(MetricsFileTest, PromtoolAcceptsItUnderLoadAndItEqualsStatsJson) {
  PVDISK_REQUIRE_FIO();
  if (RunCommand({"sh", "-c", "command -v promtool"}).exit_code != 0) {
    GTEST_SKIP() << "promtool not installed (scripts/install-deps.sh)";
  }
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("disk0.img"), "--queues", "2"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string metrics = mount.Path("metrics");

  // Under load: fio runs while the file is read and checked.
  BackgroundProcess fio(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randrw", "--bs=4k", "--size=32M", "--iodepth=16",
                  "--numjobs=2", "--time_based", "--runtime=5"}));
  ASSERT_TRUE(fio.started());
  int checked_under_load = 0;
  while (checked_under_load < 3) {
    std::string text = ReadWholeFile(metrics);
    const bool fio_running = !fio.Wait(std::chrono::milliseconds(0));
    std::map<std::string, std::string> samples = Samples(text);
    uint64_t reads = 0;
    for (const auto& [key, value] : samples) {
      if (key.starts_with("pvdisk_disk_reads_completed_total{")) {
        reads += std::strtoull(value.c_str(), nullptr, 10);
      }
    }
    EXPECT_EQ(PromtoolProblems(dir, text), "") << text;
    if (!fio_running) break;
    if (reads > 0) ++checked_under_load;
  }
  ASSERT_TRUE(fio.Wait(std::chrono::seconds(60)));
  ExpectFioClean(fio.result());
  // Up to three times; at least once (a loaded machine may be slow to run
  // promtool while fio's few seconds pass).
  EXPECT_GE(checked_under_load, 1)
      << "fio ended before the file was read with I/O done";

  // Load stopped: nothing moves, so the two files show the same counters.
  const std::string text = ReadWholeFile(metrics);
  EXPECT_EQ(PromtoolProblems(dir, text), "") << text;
  std::map<std::string, std::string> samples = Samples(text);
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  ASSERT_EQ(stats.queues.size(), 2u);
  ASSERT_GT(stats["reads_done"], 0u);
  ASSERT_GT(stats["writes_done"], 0u);
  for (size_t q = 0; q < stats.queues.size(); ++q) {
    const std::string labels =
        absl::StrCat("{disk=\"disk0.img\",queue=\"", q, "\"}");
    std::map<std::string, uint64_t>& row = stats.queues[q];
    // node_exporter's names, in their units, checked by name here.
    EXPECT_EQ(samples["pvdisk_disk_reads_completed_total" + labels],
              absl::StrCat(row["reads_done"]));
    EXPECT_EQ(samples["pvdisk_disk_writes_completed_total" + labels],
              absl::StrCat(row["writes_done"]));
    EXPECT_EQ(samples["pvdisk_disk_read_bytes_total" + labels],
              absl::StrCat(row["sectors_read"] * 512));
    EXPECT_EQ(samples["pvdisk_disk_written_bytes_total" + labels],
              absl::StrCat(row["sectors_written"] * 512));
    EXPECT_EQ(
        Nanoseconds(samples["pvdisk_disk_read_time_seconds_total" + labels]),
        row["read_lat_ns"]);
    EXPECT_EQ(samples["pvdisk_disk_io_now" + labels], "0");
    // Every counter of counters.h, whatever its name.
    for (size_t i = 0; i < stats::kNumCounters; ++i) {
      stats::MetricName metric =
          stats::MetricFor(static_cast<stats::Counter>(i));
      const std::string counter(stats::kCounterInfo[i].name);
      ASSERT_TRUE(samples.count(metric.name + labels)) << metric.name;
      const std::string& value = samples[metric.name + labels];
      if (metric.nanoseconds_to_seconds) {
        EXPECT_EQ(Nanoseconds(value), row[counter]) << metric.name;
      } else {
        EXPECT_EQ(value, absl::StrCat(row[counter] * metric.scale))
            << metric.name;
      }
    }
    // Each histogram counts the requests answered, and its buckets grow.
    for (const char* direction : {"read", "write"}) {
      const std::string name =
          absl::StrCat("pvdisk_", direction, "_latency_seconds");
      const std::string done = absl::StrCat(direction, "s_done");
      EXPECT_EQ(samples[name + "_count" + labels], absl::StrCat(row[done]))
          << name;
      const std::string inf = absl::StrCat(
          name, "_bucket{disk=\"disk0.img\",queue=\"", q, "\",le=\"+Inf\"}");
      EXPECT_EQ(samples[inf], absl::StrCat(row[done])) << inf;
      EXPECT_EQ(Nanoseconds(samples[name + "_sum" + labels]),
                row[absl::StrCat(direction, "_lat_ns")]);
      uint64_t previous = 0;
      for (uint64_t bound : stats::MetricBucketBounds()) {
        const std::string key =
            absl::StrCat(name, "_bucket{disk=\"disk0.img\",queue=\"", q,
                         "\",le=\"", stats::SecondsText(bound), "\"}");
        ASSERT_TRUE(samples.count(key)) << key;
        uint64_t count = std::strtoull(samples[key].c_str(), nullptr, 10);
        EXPECT_GE(count, previous) << key;
        previous = count;
      }
      EXPECT_LE(previous, row[done]);
    }
  }

  // Read-only, like stats.json.
  errno = 0;
  Fd write = Open(metrics, O_WRONLY);
  EXPECT_FALSE(write.valid());
  EXPECT_EQ(errno, EACCES) << std::strerror(errno);
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
}

}  // namespace
}  // namespace pvdisk::fuse_testing
