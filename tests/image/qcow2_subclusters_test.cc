// qcow2 extended L2 entries (subclusters). Without files: the bitmap's
// runs, masks and the entries it refuses. Through a real mount, with
// QEMU's tools as the judge: images with `extended_l2=on` and 32 KiB, 64 KiB
// and 2 MiB clusters over a raw or qcow2 backing file, written by qemu-io
// (patterns of whole and partial subclusters, `write -z`), read as
// `qemu-img convert -O raw` reads them; fio's verified writes, pattern
// writes, a discard and a write of zeroes through pvdisk leave an image
// `qemu-img check` passes, `qemu-img compare` finds equal to a raw copy written
// the same way, and in which qemu-io reads pvdisk's patterns; a small write
// over the backing file copies at most its edge subclusters, not a cluster;
// kill -9 during such writes leaves every sector old or new; internal
// snapshots of such an image keep their content through pvdisk's writes
// and discards (the shared L2 table copied on the subcluster paths); with
// an L2 cache of one table, tables evicted with entries only in the
// journal read back through it. Entries with invalid bitmaps fail only
// their cluster's reads with EIO.
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "image/qcow2/subclusters.h"
#include "qemu_judge.h"

namespace pvdisk::fuse_testing {
namespace {

using image::qcow2::DecodeL2Entry;
using image::qcow2::L2Kind;
using image::qcow2::SubclusterBitmap;
using image::qcow2::SubclusterFault;
using image::qcow2::SubclusterMask;
using image::qcow2::SubclusterRunAt;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

TEST(Qcow2SubclusterBitmapTest, RunsOfSubclustersThatReadAlike) {
  // Subclusters 0..3 allocated, 4..5 zero, 6..31 unallocated.
  const SubclusterBitmap b{0x0000000fu, 0x00000030u};
  auto run = SubclusterRunAt(b, 0);
  EXPECT_EQ(run.kind, L2Kind::kData);
  EXPECT_EQ(run.count, 4u);
  run = SubclusterRunAt(b, 2);
  EXPECT_EQ(run.count, 2u);
  run = SubclusterRunAt(b, 4);
  EXPECT_EQ(run.kind, L2Kind::kZero);
  EXPECT_EQ(run.count, 2u);
  run = SubclusterRunAt(b, 6);
  EXPECT_EQ(run.kind, L2Kind::kUnallocated);
  EXPECT_EQ(run.count, 26u);
  run = SubclusterRunAt(SubclusterBitmap{~0u, 0}, 0);
  EXPECT_EQ(run.count, 32u);
  run = SubclusterRunAt(SubclusterBitmap{0x80000000u, 0}, 31);
  EXPECT_EQ(run.kind, L2Kind::kData);
  EXPECT_EQ(run.count, 1u);
  EXPECT_EQ(SubclusterMask(0, 32), ~0u);
  EXPECT_EQ(SubclusterMask(1, 3), 0x6u);
  EXPECT_EQ(SubclusterMask(31, 32), 0x80000000u);
  EXPECT_EQ(SubclusterMask(5, 5), 0u);
}

TEST(Qcow2SubclusterBitmapTest, InvalidBitmapsAreNamed) {
  const uint64_t data = (1ull << 63) | 0x30000;
  auto fault = [](uint64_t raw, uint64_t bitmap) {
    const char* f = SubclusterFault(raw, DecodeL2Entry(raw, 3, true), bitmap);
    return std::string(f ? f : "");
  };
  EXPECT_EQ(fault(data, 0x0000000100000002ull), "");
  EXPECT_EQ(fault(0, 0xffffffff00000000ull), "");  // all zero, no host
  EXPECT_NE(fault(data, 0x0000000100000001ull).find("both allocated"),
            std::string::npos);
  EXPECT_NE(fault(0, 0x1).find("without a host cluster"), std::string::npos);
  EXPECT_NE(fault((1ull << 62) | 0x30000, 0x1).find("compressed"),
            std::string::npos);
  // Bit 0 (the zero flag of standard entries) is reserved here.
  EXPECT_TRUE(DecodeL2Entry(data | 1, 3, true).reserved_bits);
  EXPECT_FALSE(DecodeL2Entry(data | 1, 3, false).reserved_bits);
}

// The disk is 4 MiB; qemu-io's writes, pvdisk's pattern writes and its
// discard go to these places; fio writes [1 MiB, 2 MiB).
const char* const kQemuWrites =
    "-c 'write -P 0xa1 0 4k' -c 'write -P 0xa2 9k 3k' "
    "-c 'write -P 0xa3 70k 1k' -c 'write -z 130k 6k' "
    "-c 'write -z 2m 256k' -c 'write -P 0xa4 2600k 300k'";
struct PvdiskWrite {
  uint64_t offset;
  uint64_t length;
  uint8_t pattern;
};
const PvdiskWrite kPvdiskWrites[] = {
    {3 * kMiB + 512, 1536, 0x5a},             // the middle of a subcluster
    {3 * kMiB + 64 * kKiB, 8 * kKiB, 0x5b},   // whole subclusters
    {8 * kKiB + 512, 5 * kKiB, 0x5c},         // over qemu-io's 0xa2
    {2 * kMiB + 100 * kKiB, 3 * kKiB, 0x5d},  // into a zeroed range
};
constexpr uint64_t kPunch = 3 * kMiB + 200 * kKiB + 512;
constexpr uint64_t kPunchLength = 300 * kKiB;
// A write of zeroes (FALLOC_FL_ZERO_RANGE) over qemu-io's 0xa4 pattern.
constexpr uint64_t kZeroRange = 2600 * kKiB + 1536;
constexpr uint64_t kZeroRangeLength = 70 * kKiB;

struct Layout {
  std::string name;
  std::string cluster;
  std::string backing_format;
  uint64_t sub;  // the subcluster size
};
void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

class Qcow2SubclusterMountTest : public ::testing::TestWithParam<Layout> {};

TEST_P(Qcow2SubclusterMountTest, QemuWritesReadAndPvdiskWritesPassQemu) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  const Layout& l = GetParam();
  TempDir dir;
  const std::string image = dir.Path("top.qcow2");
  ShOk("cd '" + dir.path() +
       "' && head -c 4194304 /dev/urandom > base.raw && " +
       (l.backing_format == "qcow2"
            ? "qemu-img convert -q -f raw -O qcow2 base.raw base && "
            : "mv base.raw base && ") +
       "qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=" +
       l.cluster + " -b base -F " + l.backing_format + " top.qcow2 && " +
       "qemu-io -f qcow2 " + kQemuWrites + " top.qcow2 >/dev/null");
  ShOk("qemu-img info '" + image + "' | grep -q 'extended l2: true'");
  const std::string before = QemuRaw(dir, image);
  const std::string expected = dir.Path("expected.raw");
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    const std::string disk = mount.Path("top.qcow2");
    ASSERT_EQ(FirstDifference(before, ReadWholeFile(disk)), "") << l.name;
    // Verified writes of 512 B .. 12 KiB: whole and partial subclusters.
    ExpectFioClean(RunCommand(
        FioCommand(disk, {"--rw=randwrite", "--bsrange=512-12k", "--size=1m",
                          "--offset=1m", "--iodepth=8", "--number_ios=64",
                          "--verify=crc32c", "--do_verify=1"})));
    ShOk("cp '" + disk + "' '" + expected + "'");
    // The same pattern writes and discard into the mount and the copy.
    Fd fd = Open(disk, O_RDWR);
    Fd copy = Open(expected, O_RDWR);
    ASSERT_TRUE(fd.valid() && copy.valid()) << std::strerror(errno);
    for (const PvdiskWrite& w : kPvdiskWrites) {
      const std::string bytes(w.length, static_cast<char>(w.pattern));
      PwriteAll(fd.get(), w.offset, bytes);
      PwriteAll(copy.get(), w.offset, bytes);
    }
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        kPunch, kPunchLength),
              0)
        << std::strerror(errno);
    PwriteAll(copy.get(), kPunch, std::string(kPunchLength, '\0'));
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                        kZeroRange, kZeroRangeLength),
              0)
        << std::strerror(errno);
    PwriteAll(copy.get(), kZeroRange, std::string(kZeroRangeLength, '\0'));
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(ReadWholeFile(expected), ReadWholeFile(disk)), "")
        << l.name;
    const DiskStats stats = StatsOf(mount.mountpoint(), "top.qcow2");
    // qemu-io's writes allocated both 2 MiB clusters already.
    if (l.sub != 64 * kKiB) {
      EXPECT_GT(stats["clusters_allocated"], 0u);
    }
    // A write copies at most the parts of the two subclusters at its
    // edges, never the rest of a cluster: 64 fio writes, 4 pattern writes
    // and the two edges of the discard and of the write of zeroes.
    EXPECT_GT(stats["cow_bytes"], 0u);
    EXPECT_LE(stats["cow_bytes"], (64 + 4 + 4) * 2 * l.sub);
  }
  ShOk("qemu-img check '" + image + "'");
  ShOk("qemu-img compare -f qcow2 -F raw '" + image + "' '" + expected + "'");
  for (const PvdiskWrite& w : kPvdiskWrites) {
    char pattern[8];
    std::snprintf(pattern, sizeof(pattern), "0x%x", w.pattern);
    ShOk("qemu-io -f qcow2 -c 'read -P " + std::string(pattern) + " " +
         std::to_string(w.offset) + " " + std::to_string(w.length) + "' '" +
         image + "' | grep -q 'read " + std::to_string(w.length) + "/'");
  }
  for (auto [at, length] : {std::pair(kPunch, kPunchLength),
                            std::pair(kZeroRange, kZeroRangeLength)}) {
    ShOk("qemu-io -f qcow2 -c 'read -P 0 " + std::to_string(at) + " " +
         std::to_string(length) + "' '" + image + "' | grep -q 'read " +
         std::to_string(length) + "/'");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Clusters, Qcow2SubclusterMountTest,
    ::testing::Values(Layout{"c32k_raw", "32k", "raw", kKiB},
                      Layout{"c64k_qcow2", "64k", "qcow2", 2 * kKiB},
                      Layout{"c2m_raw", "2M", "raw", 64 * kKiB}),
    [](const ::testing::TestParamInfo<Layout>& info) {
      return info.param.name;
    });

// kill -9 during writes of 512 B .. 8 KiB over a backing file (16 KiB
// clusters, 512-byte subclusters): the block fsynced before the load
// reads back, qemu-img check finds leaks at worst, and no sector of the
// range fio wrote reads as zeros: each holds the backing file's bytes or
// fio's, never the zeros of a subcluster named before its data landed.
TEST(Qcow2SubclusterMountTest, SigkillDuringWritesLeavesOldOrNewSectors) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("top.qcow2");
  ShOk("cd '" + dir.path() +
       "' && head -c 16777216 /dev/urandom > base.raw && "
       "qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=16k "
       "-b base.raw -F raw top.qcow2");
  const std::string block = PatternBytes(7, 64 * kKiB);
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    const std::string disk = mount.Path("top.qcow2");
    {
      Fd fd = Open(disk, O_WRONLY);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), 100 * 512, block);
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    }
    BackgroundProcess fio(FioCommand(
        disk, {"--rw=randwrite", "--bsrange=512-8k", "--offset=4m", "--size=8m",
               "--iodepth=32", "--fsync=16", "--time_based", "--runtime=30"}));
    ASSERT_TRUE(fio.started());
    ASSERT_TRUE(WaitUntil(
        [&] {
          DiskStats stats = StatsOf(mount.mountpoint(), "top.qcow2");
          return stats["reqs_write"] > 300 && stats["meta_writes"] > 0;
        },
        std::chrono::seconds(30)));
    ASSERT_NO_FATAL_FAILURE(KillDaemonUnderLoad(mount, fio));
  }
  CommandResult check = Sh("qemu-img check '" + image + "'");
  EXPECT_TRUE(check.exit_code == 0 || check.exit_code == 3) << check.Describe();
  const std::string after = QemuRaw(dir, image);
  const std::string base = ReadWholeFile(dir.Path("base.raw"));
  ASSERT_EQ(after.size(), base.size());
  EXPECT_EQ(FirstDifference(block, after.substr(100 * 512, block.size())), "");
  EXPECT_EQ(FirstDifference(base.substr(12 * kMiB), after.substr(12 * kMiB)),
            "");
  const std::string zeros(512, '\0');
  uint64_t zero_sectors = 0;
  for (uint64_t at = 4 * kMiB; at < 12 * kMiB; at += 512) {
    if (after.compare(at, 512, zeros) == 0) ++zero_sectors;
  }
  EXPECT_EQ(zero_sectors, 0u);
}

// Extended L2 entries and internal snapshots in one image (64 KiB
// clusters over a raw backing file): snapshot s1 after qemu-io's first
// writes, s2 after more, so the disk's one L2 table is shared with s2 and
// some data clusters with both. pvdisk's first change either allocates
// subclusters of a cluster never written (so the subcluster path copies
// the shared table) or discards part of one (the deallocation path copies
// it); then writes into clusters the snapshots share (copied whole first)
// and fio's verified writes. Afterwards qemu-img check passes, each
// snapshot converts to what it did before, and the live disk is what the
// mount showed and the model wrote.
TEST(Qcow2SubclusterMountTest, SnapshotsKeepTheirSubclustersThroughWrites) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  for (const bool discard_first : {false, true}) {
    SCOPED_TRACE(discard_first ? "a discard first" : "a write first");
    TempDir dir;
    const std::string image = dir.Path("top.qcow2");
    ShOk("cd '" + dir.path() +
         "' && head -c 4194304 /dev/urandom > base.raw && "
         "qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=64k "
         "-b base.raw -F raw top.qcow2 && "
         "qemu-io -f qcow2 -c 'write -P 0xb1 0 4k' -c 'write -P 0xb2 256k 64k' "
         "-c 'write -P 0xb3 1m 6k' -c 'write -z 1100k 8k' top.qcow2 >/dev/null "
         "&& qemu-img snapshot -c s1 top.qcow2 && "
         "qemu-io -f qcow2 -c 'write -P 0xb4 2k 4k' -c 'write -P 0xb5 512k 3k' "
         "top.qcow2 >/dev/null && qemu-img snapshot -c s2 top.qcow2");
    const TwoSnapshots before = SnapshotsBefore(dir, image);
    ASSERT_NE(before.s1, before.s2);
    std::string model = QemuRaw(dir, image);
    const std::string shown = dir.Path("shown.raw");
    {
      Mount mount(dir.MakeDir("mnt"), {"--disk", image});
      ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
      const std::string disk = mount.Path("top.qcow2");
      Fd fd = Open(disk, O_RDWR);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      if (discard_first) {  // part of a cluster s1 and s2 share
        ASSERT_EQ(
            fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      1 * kMiB + 2 * kKiB, 6 * kKiB),
            0)
            << std::strerror(errno);
        model.replace(1 * kMiB + 2 * kKiB, 6 * kKiB, 6 * kKiB, '\0');
      }
      // Never written (partial subclusters, then whole ones); shared by
      // s2 only; shared by s1 and s2; the write of zeroes s1 saw.
      const std::vector<std::pair<uint64_t, uint64_t>> writes = {
          {3 * kMiB + 1000, 3000},
          {3 * kMiB + 64 * kKiB, 8 * kKiB},
          {2 * kKiB + 512, 1 * kKiB},
          {512 * kKiB + 4 * kKiB, 2 * kKiB},
          {256 * kKiB + 10 * kKiB, 3 * kKiB},
          {1100 * kKiB + 1 * kKiB, 2 * kKiB}};
      for (size_t i = 0; i < writes.size(); ++i) {
        const std::string bytes = PatternBytes(i + 3, writes[i].second);
        PwriteAll(fd.get(), writes[i].first, bytes);
        model.replace(writes[i].first, bytes.size(), bytes);
      }
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
      EXPECT_EQ(FirstDifference(model, PreadAll(fd.get(), 0, 4 * kMiB)), "");
      ExpectFioClean(RunCommand(FioCommand(
          disk, {"--rw=randwrite", "--bsrange=512-12k", "--offset=1536k",
                 "--size=1m", "--iodepth=8", "--number_ios=64",
                 "--verify=crc32c", "--do_verify=1"})));
      const DiskStats stats = StatsOf(mount.mountpoint(), "top.qcow2");
      EXPECT_GT(stats["cow_bytes"], 0u);
      ShOk("cp '" + disk + "' '" + shown + "'");
    }
    ExpectCheckedAndSnapshotsKept(dir, image, before);
    const std::string live = QemuRaw(dir, image);
    EXPECT_EQ(FirstDifference(ReadWholeFile(shown), live), "");
    // Outside fio's range the live disk is the model.
    EXPECT_EQ(FirstDifference(model.substr(0, 1536 * kKiB),
                              live.substr(0, 1536 * kKiB)),
              "");
    EXPECT_EQ(FirstDifference(model.substr(2560 * kKiB),
                              live.substr(2560 * kKiB), 2560 * kKiB),
              "");
  }
}

// With an L2 cache of one table (16 KiB clusters: a table maps 16 MiB;
// the disk has three), writes of partial and whole subclusters over the
// backing file go round the tables twice: each table is evicted with new
// entries only in the journal and read back through it. What the mount
// reads, before and after the commit, and what QEMU reads afterwards is
// the model.
TEST(Qcow2SubclusterMountTest, TablesEvictedFromASmallCacheReadBackTheJournal) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  const std::string image = dir.Path("top.qcow2");
  constexpr uint64_t kSize = 48 * kMiB;
  ShOk("cd '" + dir.path() +
       "' && head -c 50331648 /dev/urandom > base.raw && "
       "qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=16k "
       "-b base.raw -F raw top.qcow2");
  std::string model = ReadWholeFile(dir.Path("base.raw"));
  ASSERT_EQ(model.size(), kSize);
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",l2_cache=16k"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("top.qcow2"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    for (int round = 0; round < 2; ++round) {
      for (uint64_t table = 0; table < 3; ++table) {
        // The same cluster each round: the second round's bits join the
        // first's, which only the journal holds.
        const uint64_t cluster = table * 16 * kMiB + 5 * 16 * kKiB;
        const uint64_t at = cluster + (round == 0 ? 700 : 8 * kKiB);
        const uint64_t length = round == 0 ? 1500 : 2 * kKiB;
        const std::string bytes = PatternBytes(table * 2 + round + 1, length);
        PwriteAll(fd.get(), at, bytes);
        model.replace(at, bytes.size(), bytes);
      }
    }
    EXPECT_EQ(FirstDifference(model, PreadAll(fd.get(), 0, kSize)), "");
    const DiskStats before = StatsOf(mount.mountpoint(), "top.qcow2");
    EXPECT_EQ(before["meta_writes"], 0u);  // all of it in the journal
    EXPECT_GE(before["l2_misses"], 6u);    // every table read back
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(model, PreadAll(fd.get(), 0, kSize)), "");
  }
  ShOk("qemu-img check '" + image + "'");
  EXPECT_EQ(FirstDifference(model, QemuRaw(dir, image)), "");
}

TEST(Qcow2SubclusterMountTest, InvalidBitmapsFailOnlyTheirCluster) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  // 64 KiB clusters, 2 MiB: one L2 table of 16-byte entries. Clusters
  // 0..7 get data in their first subclusters.
  ShOk("cd '" + dir.path() +
       "' && qemu-img create -q -f qcow2 -o extended_l2=on top.qcow2 2M && "
       "for c in 0 1 2 3 4 5 6 7; do qemu-io -f qcow2 -c \"write -P 0x3$c "
       "$((c * 65536)) 4k\" top.qcow2 >/dev/null; done");
  std::string file = ReadWholeFile(dir.Path("top.qcow2"));
  const uint64_t l2 = Be64(file, Be64(file, 40)) & 0x00fffffffffffe00ull;
  auto entry = [&](uint64_t c) { return l2 + 16 * c; };
  ASSERT_EQ(Be64(file, entry(1) + 8), 0x3u);  // 4 KiB: subclusters 0 and 1
  // 1: subcluster 0 both allocated and zero.
  PutBe64(file, entry(1) + 8, 0x0000000100000003ull);
  // 2: allocated subclusters without a host cluster.
  PutBe64(file, entry(2), 0);
  // 3: a compressed entry with a bitmap.
  PutBe64(file, entry(3), (1ull << 62) | (Be64(file, entry(3)) & 0xffffffffff));
  // 4: bit 0 of the entry (reserved with extended entries).
  PutBe64(file, entry(4), Be64(file, entry(4)) | 1);
  WriteWholeFile(dir.Path("bad.qcow2"), file);

  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("bad.qcow2") + ",ro"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string disk = mount.Path("bad.qcow2");
  for (uint64_t c : {1, 2, 3, 4}) {
    EXPECT_EQ(DirectReadErrno(disk, c * 65536 + 8192, 4096), EIO) << c;
  }
  for (uint64_t c : {0, 5, 6, 7, 8, 20}) {
    EXPECT_EQ(DirectReadErrno(disk, c * 65536, 65536), 0) << c;
  }
  Fd fd = Open(disk, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(PreadAll(fd.get(), 5 * 65536, 4096), std::string(4096, '\x35'));
  EXPECT_EQ(PreadAll(fd.get(), 5 * 65536 + 4096, 4096),
            std::string(4096, '\0'));
  EXPECT_TRUE(IsMounted(mount.mountpoint()));
}

}  // namespace
}  // namespace pvdisk::fuse_testing
