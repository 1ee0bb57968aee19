// Merging in the staging queue on a real mount, over both ring protocols:
// fio verifies data written through merged requests, and the counters show
// what --merge, --dispatch and --plug-us do.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Parametrized by the --frontend. The counter tests use the sync engine:
// its backend is slower than io_uring's, so a 32-entry ring reliably fills
// and staged writes meet (with io_uring a blkif ring of 32 sometimes keeps
// up with fio's 64 writes and nothing merges).
class MergeFioTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Mounts a 128 MiB image with one queue of 32 entries over the
  // parameter's frontend plus `mount_args`, runs fio with `fio_args` and
  // crc32c verification, and checks the counters every run must show.
  // Returns false (and fails the test) if the mount or the stats are
  // missing; fio's own failure only fails the test.
  bool RunFio(const std::vector<std::string>& mount_args,
              const std::vector<std::string>& fio_args, DiskStats* out) {
    TempDir dir;
    const std::string image = dir.Path("disk0.img");
    CreateImage(image, 128 * kMiB);
    std::vector<std::string> args = {"--disk",      image,      "--frontend",
                                     GetParam(),    "--queues", "1",
                                     "--ring-size", "32"};
    args.insert(args.end(), mount_args.begin(), mount_args.end());
    Mount mount(dir.MakeDir("mnt"), args);
    if (!mount.ok()) {
      ADD_FAILURE() << mount.mount_result().Describe();
      return false;
    }
    std::vector<std::string> job = fio_args;
    job.insert(job.end(), {"--bs=4k", "--verify=crc32c", "--do_verify=1"});
    CommandResult fio = RunCommand(FioCommand(mount.Path("disk0.img"), job),
                                   std::chrono::seconds(120));
    ExpectFioClean(fio);
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    if (stats.total.empty()) return false;
    EXPECT_EQ(stats.config["frontend"], GetParam());
    EXPECT_EQ(stats.config["ring_size"], "32");
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(stats["invalid_reqs"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);
    EXPECT_EQ(stats["splits"], 0u);
    // Every 4 KiB FUSE write is one BlockIo: its own ring request or merged
    // into another one.
    EXPECT_EQ(stats["reqs_write"] + stats["merges_write"],
              stats["fuse_writes"]);
    EXPECT_EQ(stats["reqs_read"] + stats["merges_read"], stats["fuse_reads"]);
    EXPECT_EQ(stats["sectors_written"], stats["fuse_writes"] * 8);
    *out = stats;
    return !::testing::Test::HasFatalFailure();
  }
};

TEST_P(MergeFioTest, SequentialWritesVerify) {
  PVDISK_REQUIRE_FIO();
  DiskStats stats;
  ASSERT_TRUE(RunFio({}, {"--rw=write", "--iodepth=64", "--size=64M"}, &stats));
  EXPECT_EQ(stats.config["merge"], "on");
  EXPECT_EQ(stats["fuse_writes"], 64 * kMiB / 4096);
}

TEST_P(MergeFioTest, RandomWritesVerify) {
  PVDISK_REQUIRE_FIO();
  DiskStats stats;
  ASSERT_TRUE(
      RunFio({}, {"--rw=randwrite", "--iodepth=64", "--size=64M"}, &stats));
  EXPECT_EQ(stats.config["merge"], "on");
  EXPECT_EQ(stats["fuse_writes"], 64 * kMiB / 4096);
}

TEST_P(MergeFioTest, SequentialWritesMergeWhileTheRingIsFull) {
  PVDISK_REQUIRE_FIO();
  DiskStats stats;
  ASSERT_TRUE(RunFio({"--merge", "on", "--engine", "sync"},
                     {"--rw=write", "--iodepth=64", "--size=16M"}, &stats));
  EXPECT_EQ(stats.config["merge"], "on");
  EXPECT_EQ(stats.config["dispatch"], "when-room");
  EXPECT_GT(stats["merges_write"], 0u);
  EXPECT_LT(stats["reqs_write"], stats["fuse_writes"]);
  EXPECT_GT(stats["ring_full"], 0u);
  EXPECT_GT(stats["segments"], stats["reqs_write"]);
}

TEST_P(MergeFioTest, MergeOffSendsEveryWriteAlone) {
  PVDISK_REQUIRE_FIO();
  DiskStats stats;
  ASSERT_TRUE(RunFio({"--merge", "off", "--engine", "sync"},
                     {"--rw=write", "--iodepth=64", "--size=16M"}, &stats));
  EXPECT_EQ(stats.config["merge"], "off");
  EXPECT_EQ(stats["merges_write"], 0u);
  EXPECT_EQ(stats["merges_read"], 0u);
  EXPECT_EQ(stats["reqs_write"], stats["fuse_writes"]);
  EXPECT_EQ(stats["segments"], stats["reqs_write"] + stats["reqs_read"]);
}

TEST_P(MergeFioTest, DispatchAlwaysNeverMerges) {
  PVDISK_REQUIRE_FIO();
  DiskStats stats;
  ASSERT_TRUE(RunFio({"--dispatch", "always", "--engine", "sync"},
                     {"--rw=write", "--iodepth=64", "--size=16M"}, &stats));
  EXPECT_EQ(stats.config["dispatch"], "always");
  EXPECT_EQ(stats["merges_write"], 0u);
  EXPECT_EQ(stats["merges_read"], 0u);
  EXPECT_EQ(stats["reqs_write"], stats["fuse_writes"]);
  EXPECT_GT(stats["dispatch_busy"], 0u);
}

TEST_P(MergeFioTest, PlugMergesAShallowQueue) {
  PVDISK_REQUIRE_FIO();
  DiskStats stats;
  ASSERT_TRUE(RunFio({"--plug-us", "100"},
                     {"--rw=write", "--iodepth=8", "--size=16M"}, &stats));
  EXPECT_EQ(stats.config["plug_us"], "100");
  EXPECT_GT(stats["plugs"], 0u);
  EXPECT_GT(stats["merges_write"], 0u);
  EXPECT_LT(stats["reqs_write"], stats["fuse_writes"]);
}

// The "Merge" prefix keeps these in --gtest_filter='Merge*'.
INSTANTIATE_TEST_SUITE_P(MergeFrontends, MergeFioTest,
                         ::testing::ValuesIn(AllFrontends()),
                         [](const auto& info) {
                           return FrontendTestName(info.param);
                         });
// nvme: a merged request goes as one command with a PRP list of its pages.
INSTANTIATE_TEST_SUITE_P(Nvme, MergeFioTest, ::testing::Values("nvme"),
                         [](const auto& info) { return info.param; });

// Sequential 512-byte writes: each lies at the start of a page of its own
// and ends inside it. blkif's segments may leave such holes, so its
// staging queue merges the writes; nvme's PRPs cannot describe a hole
// (DriverRing::NeedsGaplessSegments), so none may merge there, and the
// data must verify on both. `frontend` serves the mount.
DiskStats SectorWritesOn(const std::string& frontend) {
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 16 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image, "--frontend", frontend, "--queues", "1",
               "--ring-size", "32", "--engine", "sync"});
  EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
  if (!mount.ok()) return {};
  ExpectFioClean(
      RunCommand(FioCommand(mount.Path("disk0.img"),
                            {"--rw=write", "--bs=512", "--iodepth=64",
                             "--size=2M", "--verify=crc32c", "--do_verify=1"}),
                 std::chrono::seconds(120)));
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["errors"], 0u) << frontend;
  EXPECT_EQ(stats["invalid_reqs"], 0u) << frontend;
  EXPECT_EQ(stats["fuse_writes"], 2 * kMiB / 512) << frontend;
  return stats;
}

TEST(MergeGaplessTest, NvmeNeverMergesAcrossAHoleWhereBlkifDoes) {
  PVDISK_REQUIRE_FIO();
  DiskStats blkif = SectorWritesOn("blkif");
  DiskStats nvme = SectorWritesOn("nvme");
  EXPECT_GT(blkif["merges_write"], 0u) << "the job never let writes merge";
  EXPECT_EQ(nvme["merges_write"], 0u);
  EXPECT_EQ(nvme["reqs_write"], nvme["fuse_writes"]);
}

}  // namespace
}  // namespace pvdisk::fuse_testing
