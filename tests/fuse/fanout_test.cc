// An engine that serves each request with two I/Os, one after the other
// (PVDISK_TEST_FAULT=fanout, io/test_fault.h: a sector-0 read, then the
// request), through a real mount: the loops that drive engines must take
// its progress without a completion for work (io/io_engine.h), or the
// second I/O is never submitted or its completion never reaped and fio
// hangs. fio's verified writes and reads at iodepth 1 and 64 must finish
// with the right data, within a time limit, on both placements and with the
// uring and sync engines (the sync one completes inside Queue(), so only a
// loop that calls Run() again returns the request). Under a delay model
// too, which must pass the fan-out's progress on (io/delay_engine.h).
#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Placement, engine, and whether the disk has a delay model over the fan-out.
using PlacementEngine = std::tuple<std::string, std::string, bool>;

class FanoutTest : public ::testing::TestWithParam<PlacementEngine> {};

TEST_P(FanoutTest, FioVerifiesAtDepthOneAndSixtyFour) {
  const auto& [placement, engine, delay] = GetParam();
  std::vector<std::string> args = {"--placement", placement, "--engine",
                                   engine};
  if (placement == "inline") {
    // Inline needs the uring channel: the suite's uring run covers it.
    PVDISK_REQUIRE_FUSE_URING();
    if (TestFuseIo() == "classic") {
      GTEST_SKIP() << "the inline placement runs on the uring channel";
    }
    args.insert(args.end(), {"--fuse-io", "uring"});
  } else {
    PVDISK_REQUIRE_FIO();
  }
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  ScopedTestFault fault("fanout");
  args.insert(args.begin(), {"--disk", delay ? image + ",delay=200" : image});
  Mount mount(dir.MakeDir("mnt"), args);
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DiskStats before = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_NE(before.config["engine_mode"].find("test fan-out"),
            std::string::npos)
      << before.config["engine_mode"];

  struct Job {
    const char* iodepth;
    const char* size;
    const char* offset;
  };
  for (const Job& job : {Job{"1", "4M", "0"}, Job{"64", "16M", "32M"}}) {
    // A hung request fails the test here after the limit (fio is killed),
    // instead of hanging it.
    CommandResult fio =
        RunCommand(FioCommand(mount.Path("disk0.img"),
                              {"--rw=randwrite", "--bs=4k",
                               std::string("--iodepth=") + job.iodepth,
                               std::string("--size=") + job.size,
                               std::string("--offset=") + job.offset,
                               "--verify=crc32c", "--do_verify=1"}),
                   std::chrono::seconds(60));
    ASSERT_FALSE(fio.timed_out)
        << "fio hung at iodepth " << job.iodepth << ": " << fio.Describe();
    ExpectFioClean(fio);
  }
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_EQ(stats.config["placement"], placement);
  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
}

std::string CombinationName(
    const ::testing::TestParamInfo<PlacementEngine>& info) {
  std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  if (std::get<2>(info.param)) name += "_delay";
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(PlacementsAndEngines, FanoutTest,
                         ::testing::Combine(::testing::Values("backend-thread",
                                                              "inline"),
                                            ::testing::Values("uring", "sync"),
                                            ::testing::Values(false)),
                         CombinationName);

// The sync engine completes inside Queue(), so under the delay only the
// progress the delay model passes on brings the second I/O's completion
// back when the loop looks without waiting (inline).
INSTANTIATE_TEST_SUITE_P(
    UnderADelay, FanoutTest,
    ::testing::Combine(::testing::Values("backend-thread", "inline"),
                       ::testing::Values("sync"), ::testing::Values(true)),
    CombinationName);

}  // namespace
}  // namespace pvdisk::fuse_testing
