// The `stats` and `stats.json` files of a mount: format, shape, reset.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "stats/counters.h"
#include "stats/render.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Every column after "disk" and "queue", in order: the counters straight
// from the X-macro of src/stats/counters.h, then the latency percentiles.
std::vector<std::string> CounterColumns() {
#define PVDISK_TEST_COUNTER_NAME(name, kind, meaning) #name,
  std::vector<std::string> names = {
      PVDISK_QUEUE_COUNTERS(PVDISK_TEST_COUNTER_NAME)};
#undef PVDISK_TEST_COUNTER_NAME
  for (std::string& name : stats::LatencyColumnNames()) names.push_back(name);
  return names;
}

// The latency columns are the last ones of CounterColumns().
const size_t kLatencyColumns = stats::LatencyColumnNames().size();

// The config keys of a disk's section, in order (src/fuse/disk.cc,
// Disk::Report).
const std::vector<std::string>& ConfigKeys() {
  static const std::vector<std::string> keys = {"image",
                                                "size",
                                                "read_only",
                                                "lock",
                                                "frontend",
                                                "queues",
                                                "queue_map",
                                                "backend_threads",
                                                "ring_size",
                                                "ring_pages",
                                                "max_segments",
                                                "pool_pages",
                                                "shared_bytes",
                                                "persistent",
                                                "notify",
                                                "merge",
                                                "dispatch",
                                                "plug_us",
                                                "irq",
                                                "poll_us",
                                                "engine",
                                                "engine_depth",
                                                "engine_max_inflight",
                                                "engine_mode",
                                                "delay_us",
                                                "delay_write_us",
                                                "zero_copy",
                                                "fixed_buffers",
                                                "fuse_io",
                                                "fuse_queues",
                                                "fuse_queue_pin",
                                                "fuse_huge_entries",
                                                "fuse_huge_made",
                                                "fuse_spread",
                                                "placement",
                                                "backend",
                                                "cache",
                                                "log"};
  return keys;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Writes `text` to `path` opened O_WRONLY|O_TRUNC, as `echo text > path`.
// Returns write()'s result; errno is set on failure.
ssize_t WriteCommand(const std::string& path, const std::string& text) {
  Fd fd = Open(path, O_WRONLY | O_TRUNC);
  if (!fd.valid()) return -1;
  ssize_t n = write(fd.get(), text.data(), text.size());
  int saved = errno;
  fd.Close();
  errno = saved;
  return n;
}

void DoSomeIo(const std::string& disk) {
  Fd fd = Open(disk, O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  PwriteAll(fd.get(), kMiB + 5, PatternBytes(61, 20000));
  PreadAll(fd.get(), 0, 300000, 65536);
  ASSERT_EQ(fsync(fd.get()), 0);
}

TEST(StatsFileTest, ResetZeroesCountersAndGarbageIsRefused) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 16 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img")});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string stats_path = mount.Path("stats");

  DoSomeIo(mount.Path("disk0.img"));
  DiskStats before = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_GT(before["fuse_reads"], 0u);
  EXPECT_GT(before["fuse_writes"], 0u);
  EXPECT_GT(before["reqs_flush"], 0u);
  EXPECT_GT(before["inflight_max"], 0u);
  EXPECT_GT(before["lat_us_p50"], 0u);

  ASSERT_EQ(WriteCommand(stats_path, "reset\n"), 6) << std::strerror(errno);
  DiskStats after = StatsOf(mount.mountpoint(), "disk0.img");
  for (const std::string& column : CounterColumns()) {
    EXPECT_EQ(after[column], 0u) << column;
  }
  // Every queue's row is reset, not only the total.
  ASSERT_EQ(after.queues.size(), DefaultQueueCount(after));
  for (size_t q = 0; q < after.queues.size(); ++q) {
    for (const std::string& column : CounterColumns()) {
      auto it = after.queues[q].find(column);
      ASSERT_NE(it, after.queues[q].end()) << "queue " << q << " " << column;
      EXPECT_EQ(it->second, 0u) << "queue " << q << " " << column;
    }
  }

  // Counting starts again; the shell's way of resetting works too.
  DoSomeIo(mount.Path("disk0.img"));
  EXPECT_GT(StatsOf(mount.mountpoint(), "disk0.img")["fuse_reads"], 0u);
  CommandResult echo =
      RunCommand({"sh", "-c", "echo reset > '" + stats_path + "'"});
  EXPECT_EQ(echo.exit_code, 0) << echo.Describe();
  EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["fuse_reads"], 0u);
  ASSERT_EQ(WriteCommand(stats_path, "reset"), 5) << std::strerror(errno);

  DoSomeIo(mount.Path("disk0.img"));
  uint64_t reads = StatsOf(mount.mountpoint(), "disk0.img")["fuse_reads"];
  EXPECT_GT(reads, 0u);
  for (const std::string& garbage :
       {std::string("garbage\n"), std::string("reset now\n"),
        std::string("RESET\n")}) {
    errno = 0;
    EXPECT_EQ(WriteCommand(stats_path, garbage), -1) << garbage;
    EXPECT_EQ(errno, EINVAL) << garbage << ": " << std::strerror(errno);
  }
  CommandResult echo_garbage =
      RunCommand({"sh", "-c", "echo garbage > '" + stats_path + "'"});
  EXPECT_NE(echo_garbage.exit_code, 0) << echo_garbage.Describe();
  EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["fuse_reads"], reads)
      << "a refused command reset the counters";

  // stats.json is read-only.
  errno = 0;
  Fd json = Open(mount.Path("stats.json"), O_WRONLY);
  EXPECT_FALSE(json.valid());
  EXPECT_EQ(errno, EACCES) << std::strerror(errno);
}

TEST(StatsFileTest, JsonIsValidAndHasEveryCounter) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 16 * kMiB);
  const size_t kQueues = 3;
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("disk0.img"), "--ring-size", "64", "--engine",
               "sync", "--queues", std::to_string(kQueues)});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DoSomeIo(mount.Path("disk0.img"));

  std::string text = ReadWholeFile(mount.Path("stats.json"));
  const std::string copy = dir.Path("stats.json");
  WriteWholeFile(copy, text);
  CommandResult python = RunCommand(
      {"python3", "-c", "import json,sys; json.load(open(sys.argv[1]))", copy});
  EXPECT_EQ(python.exit_code, 0) << python.Describe() << "\n" << text;

  std::string error;
  std::optional<JsonValue> root = ParseJson(text, &error);
  ASSERT_TRUE(root.has_value()) << error << "\n" << text;
  ASSERT_EQ(root->type, JsonValue::Type::kObject);
  std::vector<std::string> root_keys;
  for (const auto& [key, value] : root->object) root_keys.push_back(key);
  EXPECT_EQ(root_keys, (std::vector<std::string>{"daemon_pid", "now_ns",
                                                 "since_ns", "disks"}));
  const JsonValue* now_ns = root->Find("now_ns");
  const JsonValue* since_ns = root->Find("since_ns");
  ASSERT_NE(now_ns, nullptr);
  ASSERT_NE(since_ns, nullptr);
  EXPECT_GT(since_ns->unsigned_value, 0u);
  EXPECT_GE(now_ns->unsigned_value, since_ns->unsigned_value);
  const JsonValue* daemon_pid = root->Find("daemon_pid");
  ASSERT_NE(daemon_pid, nullptr);
  EXPECT_EQ(daemon_pid->unsigned_value,
            static_cast<uint64_t>(mount.daemon_pid()));
  const JsonValue* disks = root->Find("disks");
  ASSERT_NE(disks, nullptr);
  ASSERT_EQ(disks->type, JsonValue::Type::kArray);
  ASSERT_EQ(disks->array.size(), 1u);
  const JsonValue& disk = disks->array[0];
  ASSERT_EQ(disk.type, JsonValue::Type::kObject);
  std::vector<std::string> keys;
  for (const auto& [key, value] : disk.object) keys.push_back(key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"name", "config", "queues", "total"}));

  const JsonValue* name = disk.Find("name");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(name->type, JsonValue::Type::kString);
  EXPECT_EQ(name->string, "disk0.img");

  const JsonValue* config = disk.Find("config");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->type, JsonValue::Type::kObject);
  const JsonValue* ring_size = config->Find("ring_size");
  ASSERT_NE(ring_size, nullptr);
  EXPECT_TRUE(ring_size->is_unsigned);
  EXPECT_EQ(ring_size->unsigned_value, 64u);
  const JsonValue* size = config->Find("size");
  ASSERT_NE(size, nullptr);
  EXPECT_EQ(size->unsigned_value, 16 * kMiB);
  const JsonValue* engine = config->Find("engine");
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->string, "sync");
  const JsonValue* queue_count = config->Find("queues");
  ASSERT_NE(queue_count, nullptr);
  EXPECT_TRUE(queue_count->is_unsigned);
  EXPECT_EQ(queue_count->unsigned_value, kQueues);
  std::vector<std::string> config_keys;
  for (const auto& [key, value] : config->object) config_keys.push_back(key);
  EXPECT_EQ(config_keys, ConfigKeys());

  const std::vector<std::string> columns = CounterColumns();
  auto expect_counters = [&](const JsonValue& object, const std::string& where,
                             bool with_queue) {
    ASSERT_EQ(object.type, JsonValue::Type::kObject) << where;
    std::vector<std::string> expected = columns;
    if (with_queue) expected.insert(expected.begin(), "queue");
    expected.push_back("read_latency_ns");
    expected.push_back("write_latency_ns");
    std::vector<std::string> got;
    for (const auto& [key, value] : object.object) {
      got.push_back(key);
      if (key.ends_with("_latency_ns")) {
        EXPECT_EQ(value.type, JsonValue::Type::kArray) << where << "." << key;
      } else {
        EXPECT_TRUE(value.is_unsigned) << where << "." << key;
      }
    }
    EXPECT_EQ(got, expected) << where;
  };
  const JsonValue* queues = disk.Find("queues");
  ASSERT_NE(queues, nullptr);
  ASSERT_EQ(queues->type, JsonValue::Type::kArray);
  ASSERT_EQ(queues->array.size(), kQueues);
  for (size_t q = 0; q < kQueues; ++q) {
    const std::string where = "queues[" + std::to_string(q) + "]";
    expect_counters(queues->array[q], where, true);
    const JsonValue* queue_number = queues->array[q].Find("queue");
    ASSERT_NE(queue_number, nullptr) << where;
    EXPECT_EQ(queue_number->unsigned_value, q) << where;
  }
  const JsonValue* total = disk.Find("total");
  ASSERT_NE(total, nullptr);
  expect_counters(*total, "total", false);
  const JsonValue* fuse_writes = total->Find("fuse_writes");
  ASSERT_NE(fuse_writes, nullptr);
  EXPECT_GT(fuse_writes->unsigned_value, 0u);

  // Each histogram holds one sample per answered request of its direction,
  // as ascending [upper bound in ns, count] pairs.
  for (const auto& [histogram, done] :
       {std::pair{"read_latency_ns", "reads_done"},
        std::pair{"write_latency_ns", "writes_done"}}) {
    const JsonValue* buckets = total->Find(histogram);
    ASSERT_NE(buckets, nullptr) << histogram;
    uint64_t samples = 0;
    uint64_t previous_bound = 0;
    for (const JsonValue& pair : buckets->array) {
      ASSERT_EQ(pair.array.size(), 2u) << histogram;
      EXPECT_GT(pair.array[0].unsigned_value, previous_bound) << histogram;
      EXPECT_GT(pair.array[1].unsigned_value, 0u) << histogram;
      previous_bound = pair.array[0].unsigned_value;
      samples += pair.array[1].unsigned_value;
    }
    EXPECT_GT(samples, 0u) << histogram;
    EXPECT_EQ(samples, total->Find(done)->unsigned_value) << histogram;
  }
}

// The table with one queue (its row equals the total) and with three (the
// total row combines them as counters.h says; DoSomeIo leaves queue 2 idle).
class TextTableTest : public ::testing::TestWithParam<size_t> {};

TEST_P(TextTableTest, HasCommentHeaderQueueAndTotalRows) {
  PVDISK_REQUIRE_FUSE();
  const size_t queues = GetParam();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 16 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("disk0.img"), "--ring-size", "128",
               "--queues", std::to_string(queues)});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DoSomeIo(mount.Path("disk0.img"));

  // Nothing touches the disk between the two reads, so they must agree.
  std::string text = ReadWholeFile(mount.Path("stats"));
  DiskStats json = StatsOf(mount.mountpoint(), "disk0.img");
  std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), queues + 3) << text;
  EXPECT_EQ(lines[0].rfind("# disk disk0.img: ", 0), 0u) << lines[0];
  // The comment holds the config of stats.json, key=value in the same order.
  std::vector<std::string> pairs =
      Words(lines[0].substr(std::string("# disk disk0.img: ").size()));
  std::vector<std::string> expected_pairs;
  for (const std::string& key : ConfigKeys()) {
    expected_pairs.push_back(key + "=" + json.config[key]);
  }
  EXPECT_EQ(pairs, expected_pairs) << lines[0];
  EXPECT_NE(lines[0].find(" ring_size=128 "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" engine=uring "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" queues=" + std::to_string(queues) + " "),
            std::string::npos)
      << lines[0];

  std::vector<std::string> header = Words(lines[1]);
  std::vector<std::string> expected_header = {"disk", "queue"};
  for (const std::string& column : CounterColumns()) {
    expected_header.push_back(column);
  }
  EXPECT_EQ(header, expected_header);

  std::vector<std::vector<uint64_t>> queue_rows;
  for (size_t q = 0; q < queues; ++q) {
    std::vector<std::string> row = Words(lines[2 + q]);
    ASSERT_EQ(row.size(), expected_header.size()) << lines[2 + q];
    EXPECT_EQ(row[0], "disk0.img");
    EXPECT_EQ(row[1], std::to_string(q));
    std::vector<uint64_t> values;
    for (size_t c = 2; c < row.size(); ++c) {
      values.push_back(std::stoull(row[c]));
      EXPECT_EQ(row[c], std::to_string(json.queues[q][header[c]]))
          << "queue " << q << " " << header[c];
    }
    queue_rows.push_back(values);
  }
  std::vector<std::string> total_row = Words(lines[2 + queues]);
  ASSERT_EQ(total_row.size(), expected_header.size()) << lines[2 + queues];
  EXPECT_EQ(total_row[0], "disk0.img");
  EXPECT_EQ(total_row[1], "total");
  for (size_t c = 2; c < header.size(); ++c) {
    EXPECT_EQ(total_row[c], std::to_string(json[header[c]])) << header[c];
  }
  for (size_t i = 0; i + kLatencyColumns < header.size() - 2; ++i) {
    const stats::CounterInfo& info = stats::kCounterInfo[i];
    ASSERT_EQ(header[2 + i], info.name);
    uint64_t sum = 0;
    uint64_t max = 0;
    for (const auto& row : queue_rows) {
      sum += row[i];
      max = std::max(max, row[i]);
    }
    EXPECT_EQ(std::stoull(total_row[2 + i]),
              info.kind == stats::CounterKind::kMax ? max : sum)
        << info.name;
  }
  // A percentile of all queues' latencies lies between the queues' own
  // (those that saw any request).
  for (size_t c = header.size() - kLatencyColumns; c < header.size(); ++c) {
    uint64_t low = UINT64_MAX;
    uint64_t high = 0;
    for (const auto& row : queue_rows) {
      if (row[c - 2] == 0) continue;
      low = std::min(low, row[c - 2]);
      high = std::max(high, row[c - 2]);
    }
    ASSERT_GT(high, 0u) << header[c] << ": no queue has a latency";
    uint64_t total = std::stoull(total_row[c]);
    EXPECT_GE(total, low) << header[c];
    EXPECT_LE(total, high) << header[c];
  }
  if (queues == 1) {
    for (size_t c = 2; c < header.size(); ++c) {
      EXPECT_EQ(std::to_string(queue_rows[0][c - 2]), total_row[c])
          << header[c] << " (one queue)";
    }
  } else {
    // DoSomeIo writes in the 2nd MiB (queue 1), reads in the 1st and
    // flushes (queue 0); the last queue saw nothing.
    EXPECT_GT(queue_rows[0][static_cast<size_t>(stats::Counter::reqs_read)],
              0u);
    EXPECT_GT(queue_rows[1][static_cast<size_t>(stats::Counter::reqs_write)],
              0u);
    for (size_t c = 0; c < queue_rows[queues - 1].size(); ++c) {
      EXPECT_EQ(queue_rows[queues - 1][c], 0u)
          << header[c + 2] << " of the idle queue " << queues - 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Queues, TextTableTest, ::testing::Values(1, 3),
                         [](const auto& info) {
                           return std::to_string(info.param) + "Queues";
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
