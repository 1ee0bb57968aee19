// The FUSE channels (--fuse-io): the stats header names the one in use and
// its queues, the uring channel carries verified I/O with fewer ring
// entries than requests in flight, and settings of one channel given to
// the other are refused before anything is mounted.
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

bool KernelHasFuseUring() {
  return access("/sys/module/fuse/parameters/enable_uring", F_OK) == 0;
}

TEST(FuseIoTest, StatsHeaderNamesTheChannelAndThePlacement) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  const std::string& io = stats.config["fuse_io"];
  if (!TestFuseIo().empty()) {
    EXPECT_EQ(io, TestFuseIo());
  }
  ASSERT_TRUE(io == "uring" || io == "classic") << io;
  // Without flags the uring channel drives the queues inline.
  const std::string placement = DefaultPlacement(stats);
  EXPECT_EQ(stats.config["placement"], placement);
  if (io == "uring") {
    EXPECT_EQ(stats.config["fuse_queues"],
              std::to_string(PossibleCpuCount()) + "x128");
  } else {
    EXPECT_EQ(stats.config["fuse_queues"], "none");
  }
  std::string text = ReadWholeFile(mount.Path("stats"));
  EXPECT_NE(text.find(" fuse_io=" + io + " "), std::string::npos) << text;
  EXPECT_NE(text.find(" placement=" + placement), std::string::npos) << text;
}

// Two entries per queue, 32 requests in flight: the kernel keeps what does
// not fit queued until entries are committed; nothing hangs or fails.
TEST(FuseIoTest, UringQueuesSmallerThanTheLoadStillVerify) {
  PVDISK_REQUIRE_FIO();
  if (!KernelHasFuseUring()) GTEST_SKIP() << "no FUSE over io_uring here";
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 32 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--fuse-io", "uring",
                                   "--fuse-queue-depth", "2"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DiskStats before = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(before.config["fuse_io"], "uring");
  EXPECT_EQ(before.config["fuse_queues"],
            std::to_string(PossibleCpuCount()) + "x2");
  CommandResult fio = RunCommand(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randrw", "--bsrange=512-256k", "--iodepth=32",
                  "--size=32M", "--verify=crc32c", "--numjobs=2",
                  "--offset_increment=16M", "--size=16M"}));
  ExpectFioClean(fio);
  DiskStats after = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_GT(after["fuse_writes"], 0u);
  EXPECT_GT(after["fuse_reads"], 0u);
  EXPECT_EQ(after["errors"], 0u);
}

TEST(FuseIoTest, SettingsOfTheOtherChannelAreRefused) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  const std::string mnt = dir.MakeDir("mnt");
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--fuse-io", "uring", "--fuse-threads", "2"}, "--fuse-threads"},
      {{"--fuse-io", "classic", "--fuse-queue-depth", "8"},
       "--fuse-queue-depth"},
      {{"--fuse-io", "ring"}, "--fuse-io 'ring' is not allowed"},
      {{"--fuse-queue-depth", "0"}, "--fuse-queue-depth"},
      {{"--fuse-queue-depth", "100000"}, "--fuse-queue-depth"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"mount", mnt, "--disk", image};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    CommandResult result = RunPvdisk(args);
    EXPECT_EQ(result.exit_code, 2) << result.Describe();
    EXPECT_NE(result.err.find(c.message), std::string::npos)
        << result.Describe();
    EXPECT_EQ(result.err.find('\n'), result.err.size() - 1)
        << "one line: " << result.Describe();
    EXPECT_FALSE(IsMounted(mnt));
  }
}

// --fuse-threads under the default (auto) asks for the classic channel.
TEST(FuseIoTest, FuseThreadsChoosesTheClassicChannel) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--fuse-threads", "2"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img").config["fuse_io"],
            "classic");
}

}  // namespace
}  // namespace pvdisk::fuse_testing
