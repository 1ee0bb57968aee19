// --fuse-huge-entries: on the uring channel the top entries of each queue
// have their payloads in transparent huge pages (fuse/channel/
// payload_arena.h), so that a large request reaches the disk in a few
// segments. Checked here on a real mount: the data of large and deep fio
// jobs reads back right, the stats header says how many entries are huge,
// and the daemon's huge pages stay within what those entries can take even
// when a job uses more entries than that (shown against a mount whose
// entries are all huge). Entries in 4 KiB pages that carry large requests
// are made huge (fuse/channel/huge_promotion.h), up to the bound.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
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

// fuse_huge_made once it has not moved for two seconds (the collapser works
// off the hot path, with retries), or after 30.
uint64_t SettledHugeMade(const Mount& mount) {
  uint64_t made = 0;
  auto stable_since = std::chrono::steady_clock::now();
  const auto deadline = stable_since + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    const uint64_t now = std::stoull(stats.config.at("fuse_huge_made"));
    if (now != made) {
      made = now;
      stable_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - stable_since >
               std::chrono::seconds(2)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return made;
}

TEST(HugePayloadsTest, EntriesThatCarryLargeRequestsAreMadeHugeUpToABound) {
  PVDISK_REQUIRE_FIO();
  if (!KernelHasFuseUring()) GTEST_SKIP() << "no FUSE over io_uring here";
  // Under "always" every entry is huge from its first touch anyway.
  if (testing::ThpMode() != "madvise") {
    GTEST_SKIP() << "transparent huge pages are " << testing::ThpMode();
  }
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img"), "--fuse-io",
                                   "uring", "--fuse-huge-entries", "8"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  // Large requests within the 8 huge entries of queue 0 (all on CPU 0):
  // their huge pages become resident.
  std::vector<std::string> within = kLargeJob;
  within.push_back("--cpus_allowed=0");
  ExpectVerified(mount, within);
  const uint64_t made_within = SettledHugeMade(mount);
  const long huge_within = AnonHugeKib(mount.daemon_pid());
  // A deep 4 KiB burst: entries beyond the huge ones, which the engines
  // register as fixed buffers (pinned: the collapser needs the queue
  // threads to drop them).
  std::vector<std::string> deep = kDeepJob;
  deep.push_back("--cpus_allowed=0");
  ExpectVerified(mount, deep);
  // Then 128 KiB requests 64 at a time: most land on entries in 4 KiB
  // pages, each of which asks for its huge page, as far as the bound lets.
  const std::vector<std::string> wide = {"--rw=randrw",     "--bs=128k",
                                         "--iodepth=64",    "--size=32M",
                                         "--verify=crc32c", "--cpus_allowed=0"};
  ExpectVerified(mount, wide);
  const uint64_t made = SettledHugeMade(mount);
  const long huge = AnonHugeKib(mount.daemon_pid());
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["errors"], 0u);
  // Some were made huge, and are resident as huge pages (2 MiB each)...
  const std::string seen = "made " + std::to_string(made_within) + " then " +
                           std::to_string(made) + ", AnonHugePages " +
                           std::to_string(huge_within) + " then " +
                           std::to_string(huge) + " KiB";
  std::printf("%s\n", seen.c_str());
  EXPECT_GT(made, made_within) << seen;
  EXPECT_GE(huge - huge_within, static_cast<long>(made - made_within) * 2048);
  // ...but no more than the bound: per queue, as many bytes as its 8 huge
  // entries of 1 MiB, 4 huge pages. Without it the job's 64 entries would
  // make about 28 of queue 0's pages huge.
  const uint64_t queues = QueuesOf(stats);
  EXPECT_LE(made, queues * 4) << seen;
  EXPECT_LE(huge, static_cast<long>(queues * (8 + 2 + 8) * 1024)) << seen;
  // The data read back right across the collapses (fio verified above) and
  // reads back right from the huge pages now.
  std::vector<std::string> again = wide;
  again.push_back("--verify_only");
  ExpectVerified(mount, again);
  // And small requests on the entries made huge, through fixed buffers
  // registered again on the huge pages.
  ExpectVerified(mount, deep);
  EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["errors"], 0u);
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
  EXPECT_EQ(stats.config["fuse_huge_made"], "0");
  EXPECT_EQ(stats["errors"], 0u);
  // Under "madvise" nothing else in the daemon asks for huge pages.
  if (testing::ThpMode() == "madvise") {
    EXPECT_EQ(AnonHugeKib(mount.daemon_pid()), 0);
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
