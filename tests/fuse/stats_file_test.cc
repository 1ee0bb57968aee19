// The `stats` and `stats.json` files of a mount: format, shape, reset.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "stats/counters.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Every column after "disk" and "queue", in order.
std::vector<std::string> CounterColumns() {
  std::vector<std::string> names;
  for (const stats::CounterInfo& info : stats::kCounterInfo) {
    names.emplace_back(info.name);
  }
  names.push_back("lat_us_p50");
  names.push_back("lat_us_p99");
  return names;
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
  for (const stats::CounterInfo& info : stats::kCounterInfo) {
    EXPECT_EQ(after[std::string(info.name)], 0u) << info.name;
  }
  EXPECT_EQ(after["lat_us_p50"], 0u);
  EXPECT_EQ(after["lat_us_p99"], 0u);
  ASSERT_EQ(after.queues.size(), 1u);
  EXPECT_EQ(after.queues[0]["fuse_reads"], 0u);

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
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img"),
                                   "--ring-size", "64", "--engine", "sync"});
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
  ASSERT_EQ(root->object.size(), 1u) << text;
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

  const std::vector<std::string> columns = CounterColumns();
  auto expect_counters = [&](const JsonValue& object, const std::string& where,
                             bool with_queue) {
    ASSERT_EQ(object.type, JsonValue::Type::kObject) << where;
    std::vector<std::string> expected = columns;
    if (with_queue) expected.insert(expected.begin(), "queue");
    std::vector<std::string> got;
    for (const auto& [key, value] : object.object) {
      got.push_back(key);
      EXPECT_TRUE(value.is_unsigned) << where << "." << key;
    }
    EXPECT_EQ(got, expected) << where;
  };
  const JsonValue* queues = disk.Find("queues");
  ASSERT_NE(queues, nullptr);
  ASSERT_EQ(queues->type, JsonValue::Type::kArray);
  ASSERT_EQ(queues->array.size(), 1u);
  expect_counters(queues->array[0], "queues[0]", true);
  const JsonValue* queue_number = queues->array[0].Find("queue");
  ASSERT_NE(queue_number, nullptr);
  EXPECT_EQ(queue_number->unsigned_value, 0u);
  const JsonValue* total = disk.Find("total");
  ASSERT_NE(total, nullptr);
  expect_counters(*total, "total", false);
  const JsonValue* fuse_writes = total->Find("fuse_writes");
  ASSERT_NE(fuse_writes, nullptr);
  EXPECT_GT(fuse_writes->unsigned_value, 0u);
}

TEST(StatsFileTest, TextTableHasCommentHeaderQueueAndTotalRows) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 16 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("disk0.img"), "--ring-size", "128"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DoSomeIo(mount.Path("disk0.img"));

  // Nothing touches the disk between the two reads, so they must agree.
  std::string text = ReadWholeFile(mount.Path("stats"));
  DiskStats json = StatsOf(mount.mountpoint(), "disk0.img");
  std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 4u) << text;
  EXPECT_EQ(lines[0].rfind("# disk disk0.img: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("ring_size=128"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("engine=uring"), std::string::npos) << lines[0];

  std::vector<std::string> header = Words(lines[1]);
  std::vector<std::string> expected_header = {"disk", "queue"};
  for (const std::string& column : CounterColumns()) {
    expected_header.push_back(column);
  }
  EXPECT_EQ(header, expected_header);

  std::vector<std::string> queue_row = Words(lines[2]);
  std::vector<std::string> total_row = Words(lines[3]);
  ASSERT_EQ(queue_row.size(), expected_header.size()) << lines[2];
  ASSERT_EQ(total_row.size(), expected_header.size()) << lines[3];
  EXPECT_EQ(queue_row[0], "disk0.img");
  EXPECT_EQ(queue_row[1], "0");
  EXPECT_EQ(total_row[0], "disk0.img");
  EXPECT_EQ(total_row[1], "total");
  for (size_t c = 2; c < header.size(); ++c) {
    EXPECT_EQ(total_row[c], std::to_string(json[header[c]])) << header[c];
    EXPECT_EQ(queue_row[c], total_row[c]) << header[c] << " (one queue)";
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
