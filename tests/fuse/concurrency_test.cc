// The FUSE channels with everything at once: two fio jobs of verified random
// reads and writes at iodepth 256, while another thread reads the stats
// files in a loop, on each way a request can be handed on: on the uring
// channel answered inline (the queue thread's own ring does the image I/O),
// moved between queue threads (--fuse-spread on, both jobs on one CPU so
// that its queue spreads), and answered by backend threads; and on the
// classic channel. The data verifies and every stats read is whole. `make
// tsan` runs these under ThreadSanitizer, where a race anywhere in the
// daemon fails them too (tsan_reports.h).
#include <unistd.h>

#include <atomic>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

struct Case {
  const char* name;
  std::vector<std::string> mount_flags;
  bool uring;    // else the classic channel
  bool one_cpu;  // both fio jobs on CPU 0
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ConcurrencyTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConcurrencyTest, DeepRandrwWithAStatsReaderVerifies) {
  const Case& c = GetParam();
  if (c.uring) {
    PVDISK_REQUIRE_FUSE_URING();
  } else {
    PVDISK_REQUIRE_FIO();
  }
  const bool two_cpus = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 32 * kMiB);
  std::vector<std::string> flags = {"--disk", dir.Path("disk0.img"),
                                    "--fuse-io", c.uring ? "uring" : "classic"};
  flags.insert(flags.end(), c.mount_flags.begin(), c.mount_flags.end());
  Mount mount(dir.MakeDir("mnt"), flags);
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  // Reads both stats files until fio is done; each must come whole.
  std::atomic<bool> done{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      std::string table = ReadWholeFile(mount.Path("stats"));
      EXPECT_NE(table.find("disk0.img"), std::string::npos) << table;
      std::string error;
      std::string json = ReadWholeFile(mount.Path("stats.json"));
      EXPECT_TRUE(ParseJson(json, &error).has_value()) << error << "\n" << json;
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::vector<std::string> job = {"--rw=randrw",           "--bsrange=4k-64k",
                                  "--iodepth=256",         "--numjobs=2",
                                  "--offset_increment=8M", "--size=8M",
                                  "--verify=crc32c"};
  if (c.one_cpu) {
    job.push_back("--cpus_allowed=0");
  } else if (two_cpus) {
    job.push_back("--cpus_allowed=0-1");
    job.push_back("--cpus_allowed_policy=split");
  }
  CommandResult fio = RunCommand(FioCommand(mount.Path("disk0.img"), job),
                                 std::chrono::seconds(240));
  done.store(true, std::memory_order_release);
  reader.join();
  ExpectFioClean(fio);
  EXPECT_GT(reads.load(), 0u);

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["invalid_reqs"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  ExpectTotalsAgreeWithQueues(stats);
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
}

INSTANTIATE_TEST_SUITE_P(
    Channels, ConcurrencyTest,
    ::testing::Values(Case{"UringInline",
                           {"--placement", "inline", "--fuse-spread", "off"},
                           true,
                           false},
                      Case{"UringInlineSpread",
                           {"--placement", "inline", "--fuse-spread", "on"},
                           true,
                           true},
                      Case{"UringBackendThread",
                           {"--placement", "backend-thread"},
                           true,
                           false},
                      Case{"Classic", {"--fuse-threads", "4"}, false, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace pvdisk::fuse_testing
