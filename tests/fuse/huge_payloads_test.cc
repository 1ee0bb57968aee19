// --fuse-huge-entries: on the uring channel the top entries of each queue
// have their payloads in transparent huge pages (fuse/channel/
// payload_arena.h), so that a large request reaches the disk in a few
// segments. Checked here on a real mount: the data of large and deep fio
// jobs reads back right, the stats header says how many entries are huge,
// and the daemon's huge pages stay within what those entries can take even
// when a job uses more entries than that (shown against a mount whose
// entries are all huge).
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/thp_mode.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

bool KernelHasFuseUring() {
  return access("/sys/module/fuse/parameters/enable_uring", F_OK) == 0;
}

// The daemon's resident anonymous huge pages, in KiB (-1 if unreadable).
long AnonHugeKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(sizeof("AnonHugePages:") - 1));
    }
  }
  return -1;
}

// Queues of the mount, from the header's fuse_queues ("2x128").
uint64_t QueuesOf(const DiskStats& stats) {
  const std::string& queues = stats.config.at("fuse_queues");
  return std::stoull(queues.substr(0, queues.find('x')));
}

void ExpectVerified(const Mount& mount, const std::vector<std::string>& job) {
  ExpectFioClean(RunCommand(FioCommand(mount.Path("disk0.img"), job),
                            std::chrono::seconds(180)));
}

// Large requests at a depth within the huge entries, then 4 KiB ones at a
// depth of 64 (more entries than are huge), all verified.
const std::vector<std::string> kLargeJob = {"--rw=randrw", "--bsrange=128k-1m",
                                            "--iodepth=8", "--size=32M",
                                            "--verify=crc32c"};
const std::vector<std::string> kDeepJob = {
    "--rw=randrw", "--bs=4k", "--iodepth=64", "--size=16M", "--verify=crc32c"};

TEST(HugePayloadsTest, LargeAndDeepJobsReadBackWithinTheHugeEntries) {
  PVDISK_REQUIRE_FIO();
  if (!KernelHasFuseUring()) GTEST_SKIP() << "no FUSE over io_uring here";
  const std::string mode = testing::ThpMode();
  const bool thp = mode == "madvise" || mode == "always";
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img"), "--fuse-io",
                                   "uring", "--fuse-huge-entries", "8"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  ExpectVerified(mount, kLargeJob);
  ExpectVerified(mount, kDeepJob);
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["zero_copy"], "yes");
  EXPECT_EQ(stats.config["fuse_huge_entries"], thp ? "8" : "0") << mode;
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_GT(stats["zero_copy_ios"], 0u);
  if (!thp) GTEST_SKIP() << "transparent huge pages are " << mode << " here";
  const long huge_kib = AnonHugeKib(mount.daemon_pid());
  // The large job's payloads were in huge pages...
  EXPECT_GT(huge_kib, 0);
  // ...and the deep job, using up to 64 entries of a queue, did not make
  // more of them huge than the 8 advised ones (one more huge page per
  // queue for the rounding at the first huge entry).
  if (mode != "madvise") return;
  const long bound = static_cast<long>(QueuesOf(stats) * (8 + 2) * 1024);
  EXPECT_LE(huge_kib, bound);
  // That the deep job used more entries than the bound covers: with every
  // entry huge, the same job makes more huge pages than that.
  TempDir all_dir;
  CreateImage(all_dir.Path("disk0.img"), 64 * kMiB);
  Mount all(all_dir.MakeDir("mnt"),
            {"--disk", all_dir.Path("disk0.img"), "--fuse-io", "uring",
             "--fuse-huge-entries", "128"});
  ASSERT_TRUE(all.ok()) << all.mount_result().Describe();
  std::vector<std::string> one_cpu = kDeepJob;
  one_cpu.push_back("--cpus_allowed=0");
  ExpectVerified(all, one_cpu);
  EXPECT_GT(AnonHugeKib(all.daemon_pid()), bound);
}

TEST(HugePayloadsTest, NoneAskedNoneMade) {
  PVDISK_REQUIRE_FIO();
  if (!KernelHasFuseUring()) GTEST_SKIP() << "no FUSE over io_uring here";
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img"), "--fuse-io",
                                   "uring", "--fuse-huge-entries", "0"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  ExpectVerified(mount, kLargeJob);
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["fuse_huge_entries"], "0");
  EXPECT_EQ(stats["errors"], 0u);
  // Under "madvise" nothing else in the daemon asks for huge pages.
  if (testing::ThpMode() == "madvise") {
    EXPECT_EQ(AnonHugeKib(mount.daemon_pid()), 0);
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
