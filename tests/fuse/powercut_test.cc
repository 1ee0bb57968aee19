// pvdisk's own promise under power cuts (--disk IMG,cache=volatile and
// `pvdisk powercut`): every write an fsync covered before the cut reads
// back after it. The workload of powercut_workload.h (numbered blocks,
// fsyncs between batches, `pvdisk powercut --keep random` at a random
// point); then the raw image is read directly and checked. On every
// frontend, with merging on, on both placements and in a backend process
// (--backend process, where the cache lives in that process).
//
// The negative control: with PVDISK_TEST_FAULT=lying-flush a flush
// completes without making anything durable, and the same check must find
// fsynced blocks lost, or it would prove nothing.
//
// PVDISK_POWERCUT_CUTS sets the number of cuts per case (the suite runs a
// one per case; `make powercut-check` runs 200 of the first case).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "powercut_workload.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kBlocks = 2048;  // an 8 MiB disk

// (frontend, placement); the placement "backend-process" is --backend
// process (as the stats header names it).
using Case = std::tuple<std::string, std::string>;

std::vector<std::string> MountArgs(const std::string& image,
                                   const Case& param) {
  const auto& [frontend, placement] = param;
  // The smallest cache: writes start write-outs of their own every few
  // batches, so that flushes and the cut also meet a write-out under way.
  std::vector<std::string> args = {
      "--disk",     image + ",cache=volatile,cache_size=1M",
      "--frontend", frontend,
      "--merge",    "on",
      "--queues",   "2"};
  if (placement == "backend-process") {
    args.insert(args.end(), {"--backend", "process"});
  } else {
    args.insert(args.end(), {"--placement", placement});
  }
  if (placement == "inline") args.insert(args.end(), {"--fuse-io", "uring"});
  return args;
}

// One mount, writes, a cut at a random point, unmount, check.
CutOutcome OneCut(const TempDir& dir, const Case& param, uint64_t seed) {
  CutOutcome outcome;
  const std::string image = dir.Path("cut.img");
  unlink(image.c_str());
  CreateImage(image, kBlocks * kCutBlock);
  const std::string mnt = dir.Path("mnt");
  Ledger ledger;
  {
    Mount mount(mnt, MountArgs(image, param));
    EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
    if (!mount.ok()) return outcome;
    WriteAndCut(
        CutWorkload{mount.Path("cut.img"), mnt, kBlocks, "random", seed},
        ledger, outcome);
    CommandResult unmounted = mount.Unmount();
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  // The reboot's view: the image file as the cut left it.
  Fd raw = Open(image, O_RDONLY);
  EXPECT_TRUE(raw.valid());
  CheckBlocks(PreadAll(raw.get(), 0, kBlocks * kCutBlock), kBlocks, ledger,
              outcome);
  return outcome;
}

class PowercutPromiseTest : public ::testing::TestWithParam<Case> {};

TEST_P(PowercutPromiseTest, EveryFsyncedBlockSurvivesRandomCuts) {
  const auto& [frontend, placement] = GetParam();
  if (placement == "inline") {
    PVDISK_REQUIRE_FUSE_URING();
    if (TestFuseIo() == "classic") {
      GTEST_SKIP() << "the inline placement runs on the uring channel";
    }
  } else {
    PVDISK_REQUIRE_FUSE();
  }
  TempDir dir;
  dir.MakeDir("mnt");
  const int cuts = CutsPerCase(1);
  uint64_t durable = 0;
  for (int cut = 0; cut < cuts; ++cut) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(cut);
    CutOutcome outcome = OneCut(dir, GetParam(), seed);
    EXPECT_EQ(outcome.lost, 0u)
        << "seed " << seed << ": " << outcome.first_problem;
    EXPECT_EQ(outcome.torn, 0u)
        << "seed " << seed << ": " << outcome.first_problem;
    EXPECT_EQ(outcome.unexpected, 0u)
        << "seed " << seed << ": " << outcome.first_problem;
    EXPECT_EQ(outcome.after_cut_errors, 2u)
        << "seed " << seed << ": a read and a write after the cut must "
        << "fail with EIO";
    durable += outcome.durable_blocks;
    if (HasFailure()) break;
  }
  std::printf("%d cut(s), %llu fsynced block(s) checked\n", cuts,
              static_cast<unsigned long long>(durable));
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string placement = std::get<1>(info.param);
  for (char& c : placement) {
    if (c == '-') c = '_';
  }
  return FrontendTestName(std::get<0>(info.param)) + "_" + placement;
}

INSTANTIATE_TEST_SUITE_P(
    FrontendsAndPlacements, PowercutPromiseTest,
    ::testing::Combine(::testing::ValuesIn(OfferedFrontends()),
                       ::testing::Values(std::string("backend-thread"),
                                         std::string("inline"),
                                         std::string("backend-process"))),
    CaseName);
// nvme on backend threads (inline is its default placement elsewhere) and
// in a backend process.
INSTANTIATE_TEST_SUITE_P(Nvme, PowercutPromiseTest,
                         ::testing::Values(Case("nvme", "backend-thread"),
                                           Case("nvme", "backend-process")),
                         CaseName);

// Fsynced blocks lost in up to three cuts with a lying flush.
uint64_t LostWithALyingFlush(const std::string& placement, uint64_t seed) {
  TempDir dir;
  dir.MakeDir("mnt");
  ScopedTestFault fault("lying-flush");
  uint64_t lost = 0;
  for (int cut = 0; cut < CutsPerCase(3) && lost == 0; ++cut) {
    lost +=
        OneCut(dir, Case{"blkif", placement}, seed + static_cast<uint64_t>(cut))
            .lost;
  }
  return lost;
}

TEST(PowercutNegativeControlTest, ALyingFlushLosesFsyncedBlocks) {
  PVDISK_REQUIRE_FUSE();
  EXPECT_GT(LostWithALyingFlush("backend-thread", 2000), 0u)
      << "the check found nothing lost although no flush made anything "
         "durable";
}

// The cache of a backend process (the test fault reaches it through the
// environment the daemon passes on).
TEST(PowercutNegativeControlTest, ALyingFlushLosesFsyncedBlocksInABackend) {
  PVDISK_REQUIRE_FUSE();
  EXPECT_GT(LostWithALyingFlush("backend-process", 4000), 0u)
      << "the check found nothing lost although no flush made anything "
         "durable";
}

// 1 MiB writes, as a sequential writer makes them (held in the cache's
// huge pages): after an fsync and a cut with a random keep, every fsynced
// write reads back, and every later one is there whole or not at all,
// as many bytes of them as the cut says it kept.
TEST(PowercutLargeWritesTest, WholeMiBWritesSurviveARandomCut) {
  PVDISK_REQUIRE_FUSE();
  constexpr uint64_t kMiB = 1 << 20;
  constexpr uint64_t kDurable = 12;  // through write-outs of a full cache
  constexpr uint64_t kHeld = 7;      // under half of cache_size: all held
  TempDir dir;
  const std::string image = dir.Path("big.img");
  CreateImage(image, (kDurable + kHeld) * kMiB);
  uint64_t kept_bytes = 0;
  {
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image + ",cache=volatile,cache_size=16M"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("big.img"), O_RDWR | O_DIRECT);
    ASSERT_TRUE(fd.valid());
    void* buffer = nullptr;
    ASSERT_EQ(posix_memalign(&buffer, 4096, kMiB), 0);
    for (uint64_t i = 0; i < kDurable + kHeld; ++i) {
      std::memset(buffer, static_cast<int>('A' + i), kMiB);
      ASSERT_EQ(pwrite(fd.get(), buffer, kMiB, static_cast<off_t>(i * kMiB)),
                static_cast<ssize_t>(kMiB));
      if (i + 1 == kDurable) {
        ASSERT_EQ(fsync(fd.get()), 0);
      }
    }
    std::free(buffer);
    EXPECT_EQ(StatsOf(mount.mountpoint(), "big.img")["unsafe_bytes"],
              kHeld * kMiB);
    CommandResult cut = RunPvdisk(
        {"powercut", mount.mountpoint(), "--keep", "random", "--seed", "5"});
    ASSERT_EQ(cut.exit_code, 0) << cut.Describe();
    DiskStats after = StatsOf(mount.mountpoint(), "big.img");
    kept_bytes = std::stoull(after.config["cut_kept_bytes"]);
    // This seed keeps some of the held writes and drops others.
    EXPECT_GT(kept_bytes, 0u);
    EXPECT_LT(kept_bytes, kHeld * kMiB);
    EXPECT_EQ(kept_bytes + std::stoull(after.config["cut_dropped_bytes"]),
              kHeld * kMiB);
    fd.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  Fd raw = Open(image, O_RDONLY);
  ASSERT_TRUE(raw.valid());
  uint64_t found = 0;
  for (uint64_t i = 0; i < kDurable + kHeld; ++i) {
    const std::string bytes = PreadAll(raw.get(), i * kMiB, kMiB);
    const bool whole = bytes == std::string(kMiB, static_cast<char>('A' + i));
    if (i < kDurable) {
      EXPECT_TRUE(whole) << "fsynced MiB " << i << " lost";
      continue;
    }
    EXPECT_TRUE(whole || bytes == std::string(kMiB, '\0'))
        << "MiB " << i << " torn";
    found += whole ? kMiB : 0;
  }
  EXPECT_EQ(found, kept_bytes);
}

// A cut of a disk without the cache, or of one already cut, is refused
// with one line naming the disk, and changes nothing: the disk goes on.
TEST(PowercutBadInputTest, RefusesADiskWithoutTheCacheOrCutAlready) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("plain.img"), 1 << 20);
  CreateImage(dir.Path("cached.img"), 1 << 20);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("plain.img"), "--disk",
                                   dir.Path("cached.img") + ",cache=volatile"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult plain =
      RunPvdisk({"powercut", mount.mountpoint(), "plain.img"});
  ExpectUsageError(plain);
  EXPECT_NE(plain.err.find("plain.img has no volatile cache"),
            std::string::npos)
      << plain.Describe();
  CommandResult which = RunPvdisk({"powercut", mount.mountpoint()});
  ExpectUsageError(which);
  EXPECT_NE(which.err.find("name the one to cut"), std::string::npos)
      << which.Describe();
  EXPECT_EQ(StatsOf(mount.mountpoint(), "plain.img").config["cache"],
            "writethrough");
  EXPECT_EQ(StatsOf(mount.mountpoint(), "cached.img").config["power"], "on");
  CommandResult cut = RunPvdisk({"powercut", mount.mountpoint(), "cached.img"});
  EXPECT_EQ(cut.exit_code, 0) << cut.Describe();
  CommandResult again =
      RunPvdisk({"powercut", mount.mountpoint(), "cached.img"});
  ExpectUsageError(again);
  EXPECT_NE(again.err.find("lost its power already"), std::string::npos)
      << again.Describe();
  // The other disk goes on.
  Fd fd = Open(mount.Path("plain.img"), O_RDWR);
  ASSERT_TRUE(fd.valid());
  PwriteAll(fd.get(), 0, "still here");
  EXPECT_EQ(PreadAll(fd.get(), 0, 10), "still here");
  fd.Close();
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

// A qcow2 image served read-only (ro, or snapshot=) is refused: the
// cache holds the metadata a writable one writes.
TEST(PowercutBadInputTest, RefusesAQcow2ImageServedReadOnly) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CommandResult created = RunPvdisk(
      {"create", dir.Path("q.qcow2"), "--size", "1M", "--format", "qcow2"});
  ASSERT_EQ(created.exit_code, 0) << created.Describe();
  CommandResult mounted =
      RunPvdisk({"mount", dir.MakeDir("mnt"), "--disk",
                 dir.Path("q.qcow2") + ",ro,cache=volatile"});
  ExpectUsageError(mounted);
  EXPECT_NE(mounted.err.find("cache=volatile needs a qcow2 image served "
                             "writable"),
            std::string::npos)
      << mounted.Describe();
  EXPECT_FALSE(IsMounted(dir.Path("mnt")));
}

}  // namespace
}  // namespace pvdisk::fuse_testing
