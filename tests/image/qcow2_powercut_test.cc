// Power cuts of qcow2 images (--disk IMG,cache=volatile and `pvdisk
// powercut`), with QEMU's tools as the judge. The image's metadata follows
// the model its data follows: held in the disk's volatile cache until a
// flush, the journal's barriers being flushes of that cache. So after a cut
// at any point, with none, all or a random subset of the unflushed writes
// (data and metadata alike) kept:
// - `qemu-img check` finds no corruption (exit 0, or 3: leaked clusters,
//   refcounts that a cut kept without the entries that name them);
// - every block an fsync covered before the cut reads back, through a new
//   mount of the image, and `qemu-img convert` reads the same disk.
// On an empty image (writes allocate clusters, and L2 tables) and on one
// over a raw backing file (writes copy the rest of their cluster from it),
// both made by qemu-img with 64 KiB clusters (and one with extended L2
// entries over a backing file: a write fills and marks its subclusters). The
// workload and the block check are the raw images'
// (tests/fuse/powercut_workload.h). Some cases serve the image from a
// backend process (--backend process): the cache, and the image's metadata
// with it, live there.
//
// The negative control: with PVDISK_TEST_FAULT=lying-flush a flush (and
// so each journal barrier) completes without making anything durable, and
// the same check must find fsynced blocks lost.
//
// PVDISK_POWERCUT_CUTS sets the number of cuts per case (`make
// powercut-check` runs many).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "powercut_workload.h"
#include "qemu_judge.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kBlocks = 8192;  // a 32 MiB disk: 512 clusters
// The id of the blocks of the backing file: above every write's id.
constexpr uint64_t kBackingId = uint64_t{1} << 40;

struct Qcow2Cut {
  CutOutcome outcome;
  int check_exit = -1;  // qemu-img check's, after the cut
  std::string check_output;
};

// Makes `top.qcow2` in `dir`: empty, or over `base.raw`, whose every block
// is FillBlock(block, kBackingId); with `extended_l2`, with subclusters.
void MakeImage(const TempDir& dir, bool backing, bool extended_l2) {
  unlink(dir.Path("top.qcow2").c_str());
  const std::string options =
      std::string("cluster_size=64k") + (extended_l2 ? ",extended_l2=on" : "");
  if (!backing) {
    ShOk("qemu-img create -q -f qcow2 -o " + options + " '" +
         dir.Path("top.qcow2") + "' " + std::to_string(kBlocks * kCutBlock));
    return;
  }
  std::string base(kBlocks * kCutBlock, '\0');
  for (uint64_t b = 0; b < kBlocks; ++b) {
    FillBlock(reinterpret_cast<uint8_t*>(base.data()) + b * kCutBlock, b,
              kBackingId);
  }
  Fd fd = Open(dir.Path("base.raw"), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.valid());
  PwriteAll(fd.get(), 0, base);
  fd.Close();
  ShOk("cd '" + dir.path() + "' && qemu-img create -q -f qcow2 -o " + options +
       " -b base.raw -F raw top.qcow2");
}

// One mount with the cache, the workload, a cut, unmount; then qemu-img
// check, and the disk read through a new mount, checked, and compared with
// what qemu-img reads.
Qcow2Cut OneCut(const TempDir& dir, bool backing, const std::string& keep,
                uint64_t seed, bool extended_l2 = false,
                bool in_process = false) {
  Qcow2Cut cut;
  MakeImage(dir, backing, extended_l2);
  const std::string image = dir.Path("top.qcow2");
  const std::string mnt = dir.Path("mnt");
  Ledger ledger;
  ledger.base = backing ? kBackingId : 0;
  {
    // A small cache: writes start write-outs of their own, so that the
    // journal's flushes and the cut also meet a write-out under way.
    std::vector<std::string> args = {
        "--disk", image + ",cache=volatile,cache_size=1M", "--queues", "2"};
    if (in_process) args.insert(args.end(), {"--backend", "process"});
    Mount mount(mnt, args);
    EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
    if (!mount.ok()) return cut;
    WriteAndCut(CutWorkload{mount.Path("top.qcow2"), mnt, kBlocks, keep, seed},
                ledger, cut.outcome);
    CommandResult unmounted = mount.Unmount();
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  CommandResult check = Sh("qemu-img check '" + image + "'");
  cut.check_exit = check.exit_code;
  cut.check_output = check.out + check.err;
  // The reboot: the image served again, as pvdisk and as QEMU read it.
  std::string bytes;
  {
    Mount mount(mnt, {"--disk", image});
    EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
    if (!mount.ok()) return cut;
    Fd fd = Open(mount.Path("top.qcow2"), O_RDONLY);
    EXPECT_TRUE(fd.valid());
    bytes = PreadAll(fd.get(), 0, kBlocks * kCutBlock);
    fd.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  CheckBlocks(bytes, kBlocks, ledger, cut.outcome);
  EXPECT_TRUE(bytes == QemuRaw(dir, image))
      << "seed " << seed << ": pvdisk and qemu-img read the disk differently";
  return cut;
}

// (backing file, --keep, cuts when PVDISK_POWERCUT_CUTS is not set,
// extended L2 entries, --backend process)
using Case = std::tuple<bool, std::string, int, bool, bool>;

class Qcow2PowercutTest : public ::testing::TestWithParam<Case> {};

TEST_P(Qcow2PowercutTest, EveryFsyncedBlockSurvivesAndQemuFindsNoCorruption) {
  PVDISK_REQUIRE_QEMU();
  const auto& [backing, keep, fallback_cuts, extended_l2, in_process] =
      GetParam();
  TempDir dir;
  dir.MakeDir("mnt");
  const int cuts = CutsPerCase(fallback_cuts);
  uint64_t durable = 0;
  int leaky = 0;
  for (int i = 0; i < cuts; ++i) {
    const uint64_t seed = 3000 + static_cast<uint64_t>(i);
    Qcow2Cut cut = OneCut(dir, backing, keep, seed, extended_l2, in_process);
    EXPECT_TRUE(cut.check_exit == 0 || cut.check_exit == 3)
        << "seed " << seed << ": qemu-img check exit " << cut.check_exit
        << " (0: clean, 3: leaks only)\n"
        << cut.check_output;
    if (cut.check_exit == 3) ++leaky;
    EXPECT_EQ(cut.outcome.lost, 0u)
        << "seed " << seed << ": " << cut.outcome.first_problem;
    EXPECT_EQ(cut.outcome.torn, 0u)
        << "seed " << seed << ": " << cut.outcome.first_problem;
    EXPECT_EQ(cut.outcome.unexpected, 0u)
        << "seed " << seed << ": " << cut.outcome.first_problem;
    EXPECT_EQ(cut.outcome.after_cut_errors, 2u)
        << "seed " << seed << ": a read and a write after the cut must "
        << "fail with EIO";
    durable += cut.outcome.durable_blocks;
    if (HasFailure()) break;
  }
  std::printf(
      "%d cut(s), %llu fsynced block(s) checked, %d image(s) with "
      "leaks\n",
      cuts, static_cast<unsigned long long>(durable), leaky);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(std::get<0>(info.param) ? "backing" : "empty") + "_" +
         std::get<1>(info.param) + (std::get<3>(info.param) ? "_xl2" : "") +
         (std::get<4>(info.param) ? "_process" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Cuts, Qcow2PowercutTest,
    ::testing::Values(Case(false, "random", 3, false, false),
                      Case(false, "none", 1, false, false),
                      Case(false, "all", 1, false, false),
                      Case(true, "random", 2, false, false),
                      Case(true, "none", 1, false, false),
                      Case(true, "random", 2, true, false),
                      Case(false, "random", 2, false, true),
                      Case(true, "all", 1, false, true)),
    CaseName);

// Metadata the cache holds at the cut. A flush commits the journal and
// flushes the cache at once, so the cuts above rarely find metadata held;
// a journal that grows past its bound (64 MiB: here a new 2 MiB L2 table
// per 512 GiB of a sparse disk) is committed without a flush, and its last
// stage (the L2 entries) stays in the cache; the L2 cache (32 MiB) cannot
// hold every table, so tables are read back through the cache too. A cut
// keeping a random subset of what the cache holds, or none, or all, must
// leave an image with leaks at worst, every fsynced block in it and every
// other block its write or zeros (with --keep all too: what the journal
// held uncommitted is lost with the power).
TEST(Qcow2PowercutTest, MetadataHeldInTheCacheAtTheCut) {
  PVDISK_REQUIRE_QEMU();
  constexpr uint64_t kCluster = uint64_t{2} << 20;
  constexpr uint64_t kRegion = kCluster / 8 * kCluster;  // an L2 table's
  constexpr uint64_t kWrites = 40;  // past the journal's 64 MiB of tables
  constexpr uint64_t kFsynced = 4;  // the first ones, fsynced
  TempDir dir;
  const std::string mnt = dir.MakeDir("mnt");
  const std::string image = dir.Path("sparse.qcow2");
  for (const std::string keep : {"random", "none", "all"}) {
    SCOPED_TRACE("--keep " + keep);
    unlink(image.c_str());
    ShOk("qemu-img create -q -f qcow2 -o cluster_size=2M '" + image + "' " +
         std::to_string(kWrites * kRegion));
    void* aligned = nullptr;
    ASSERT_EQ(posix_memalign(&aligned, kCutBlock, kCutBlock), 0);
    std::unique_ptr<void, decltype(&free)> owned(aligned, &free);
    uint8_t* block = static_cast<uint8_t*>(aligned);
    {
      Mount mount(mnt, {"--disk", image + ",cache=volatile"});
      ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
      Fd fd = Open(mount.Path("sparse.qcow2"), O_RDWR | O_DIRECT);
      ASSERT_TRUE(fd.valid());
      for (uint64_t i = 0; i < kWrites; ++i) {
        FillBlock(block, i * (kRegion / kCutBlock), i + 1);
        ASSERT_EQ(
            pwrite(fd.get(), block, kCutBlock, static_cast<off_t>(i * kRegion)),
            static_cast<ssize_t>(kCutBlock));
        if (i + 1 == kFsynced) {
          ASSERT_EQ(fsync(fd.get()), 0);
        }
      }
      // Before the cut every write reads back: the tables the L2 cache
      // evicted are read again through the volatile cache, which holds the
      // last stage's entries.
      for (uint64_t i = 0; i < kWrites; ++i) {
        ASSERT_EQ(
            pread(fd.get(), block, kCutBlock, static_cast<off_t>(i * kRegion)),
            static_cast<ssize_t>(kCutBlock));
        EXPECT_EQ(IdOf(block, i * (kRegion / kCutBlock)),
                  static_cast<int64_t>(i + 1))
            << "write " << i << " does not read back before the cut";
      }
      std::vector<std::string> cut = {"powercut", mnt, "--keep", keep};
      if (keep == "random") cut.insert(cut.end(), {"--seed", "7"});
      CommandResult cut_result = RunPvdisk(cut);
      EXPECT_EQ(cut_result.exit_code, 0) << cut_result.Describe();
      fd.Close();
      EXPECT_EQ(mount.Unmount().exit_code, 0);
    }
    CommandResult check = Sh("qemu-img check '" + image + "'");
    EXPECT_TRUE(check.exit_code == 0 || check.exit_code == 3)
        << "qemu-img check exit " << check.exit_code
        << " (0: clean, 3: leaks only)\n"
        << check.out << check.err;
    std::printf("--keep %s: qemu-img check exit %d\n", keep.c_str(),
                check.exit_code);
    Mount mount(mnt, {"--disk", image + ",ro"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("sparse.qcow2"), O_RDONLY);
    ASSERT_TRUE(fd.valid());
    uint64_t kept = 0;
    for (uint64_t i = 0; i < kWrites; ++i) {
      const std::string bytes = PreadAll(fd.get(), i * kRegion, kCutBlock);
      const int64_t id = IdOf(reinterpret_cast<const uint8_t*>(bytes.data()),
                              i * (kRegion / kCutBlock));
      if (i < kFsynced) {
        EXPECT_EQ(id, static_cast<int64_t>(i + 1)) << "block of write " << i;
      } else {
        EXPECT_TRUE(id == 0 || id == static_cast<int64_t>(i + 1))
            << "block of write " << i << " holds " << id;
      }
      if (id > 0) ++kept;
      if (HasFailure()) break;
    }
    std::printf("--keep %s: %llu of %llu writes in the image\n", keep.c_str(),
                static_cast<unsigned long long>(kept),
                static_cast<unsigned long long>(kWrites));
    fd.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
    if (HasFailure()) break;
  }
}

TEST(Qcow2PowercutNegativeControlTest, ALyingFlushLosesFsyncedBlocks) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  dir.MakeDir("mnt");
  ScopedTestFault fault("lying-flush");
  uint64_t lost = 0;
  int cuts = 0;
  int corrupt = 0;  // images qemu-img check found corrupt (exit 2)
  for (; cuts < CutsPerCase(3) && lost == 0; ++cuts) {
    Qcow2Cut cut = OneCut(dir, /*backing=*/false, "random",
                          4000 + static_cast<uint64_t>(cuts));
    lost += cut.outcome.lost;
    if (cut.check_exit == 2) ++corrupt;
  }
  EXPECT_GT(lost, 0u) << "the check found nothing lost although no flush "
                         "made anything durable";
  std::printf(
      "%d cut(s) with a lying flush: %llu fsynced block(s) lost, "
      "%d image(s) qemu-img check found corrupt\n",
      cuts, static_cast<unsigned long long>(lost), corrupt);
}

}  // namespace
}  // namespace pvdisk::fuse_testing
