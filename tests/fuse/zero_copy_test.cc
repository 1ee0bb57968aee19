// Zero copy on the uring channel: the FUSE entries' payload buffers are lent
// to every disk's queues (transport/lent_memory.h), so a READ of whole
// sectors lands in the reply's own buffer and a WRITE goes to the disk from
// the buffer the kernel filled, in both placements and with two disks;
// unaligned requests still take the copy and read back right. Where the
// backend cannot reach the payloads (classic channel, per-request grants,
// a backend process) everything is copied as before, and the stats header
// says which (zero_copy=).
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

void ExpectVerified(const Mount& mount, const std::string& name,
                    const std::vector<std::string>& job) {
  ExpectFioClean(
      RunCommand(FioCommand(mount.Path(name), job), std::chrono::seconds(180)));
}

// Sizes from 4 KiB to 1 MiB (one ring request or several children), then
// 1000-byte writes and reads (unaligned: read-modify-writes and reads that
// start inside a sector) over the same data.
const std::vector<std::string> kMixedJob = {"--rw=randrw", "--bsrange=4k-1m",
                                            "--iodepth=16", "--size=16M",
                                            "--verify=crc32c"};
const std::vector<std::string> kUnalignedJob = {"--rw=randrw", "--bs=1000",
                                                "--ioengine=psync", "--size=2M",
                                                "--verify=crc32c"};

TEST(ZeroCopyTest, UringPayloadsCarryTheDataInBothPlacements) {
  PVDISK_REQUIRE_FIO();
  if (!KernelHasFuseUring()) GTEST_SKIP() << "no FUSE over io_uring here";
  for (const char* placement : {"inline", "backend-thread"}) {
    SCOPED_TRACE(placement);
    TempDir dir;
    CreateImage(dir.Path("a.img"), 32 * kMiB);
    CreateImage(dir.Path("b.img"), 32 * kMiB);
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", dir.Path("a.img"), "--disk", dir.Path("b.img"),
                 "--fuse-io", "uring", "--placement", placement});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    for (const char* name : {"a.img", "b.img"}) {
      ExpectVerified(mount, name, kMixedJob);
      DiskStats stats = StatsOf(mount.mountpoint(), name);
      EXPECT_EQ(stats.config["zero_copy"], "yes") << name;
      EXPECT_EQ(stats.config["placement"], placement) << name;
      // Every aligned request of the job: nearly all of its BlockIos.
      const uint64_t ios = stats["fuse_reads"] + stats["fuse_writes"];
      EXPECT_GT(stats["zero_copy_ios"], ios / 2) << name;
      EXPECT_LE(stats["zero_copy_ios"], ios) << name;
      EXPECT_EQ(stats["errors"], 0u) << name;
      EXPECT_EQ(stats["invalid_reqs"], 0u) << name;
      EXPECT_EQ(stats["inflight"], 0u) << name;
      ExpectTotalsAgreeWithQueues(stats);
    }
    ExpectVerified(mount, "a.img", kUnalignedJob);
    DiskStats stats = StatsOf(mount.mountpoint(), "a.img");
    EXPECT_EQ(stats["errors"], 0u);
  }
}

TEST(ZeroCopyTest, CopiedWhereTheBackendCannotReachThePayloads) {
  PVDISK_REQUIRE_FIO();
  struct Case {
    std::vector<std::string> flags;
    bool needs_uring;
  };
  const std::vector<Case> cases = {
      {{"--fuse-io", "classic"}, false},
      {{"--fuse-io", "uring", "--persistent", "off"}, true},
      {{"--fuse-io", "uring", "--backend", "process"}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags[1] + (c.flags.size() > 2 ? " " + c.flags[2] : ""));
    if (c.needs_uring && !KernelHasFuseUring()) continue;
    TempDir dir;
    CreateImage(dir.Path("disk0.img"), 32 * kMiB);
    std::vector<std::string> args = {"--disk", dir.Path("disk0.img")};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    Mount mount(dir.MakeDir("mnt"), args);
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    ExpectVerified(mount, "disk0.img", kMixedJob);
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats.config["zero_copy"], "no");
    EXPECT_EQ(stats["zero_copy_ios"], 0u);
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_GT(stats["reqs_read"], 0u);
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
