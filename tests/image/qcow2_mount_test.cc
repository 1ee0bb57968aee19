// qcow2 images served through a real mount, with QEMU's tools as the judge:
// images qemu-img and qemu-io made (versions 2 and 3, 4 KiB to 2 MiB
// clusters, preallocated metadata, zero clusters, backing chains down to a
// raw file) read through the mount exactly as `qemu-img convert -O raw`
// reads them; fio's verified writes through the mount (allocating, copying
// the backing file's data, then in place) leave an image `qemu-img check`
// passes and `qemu-img compare` finds equal to what the mount showed;
// discarded clusters go back; a daemon killed during allocating writes
// leaves an image with leaks at worst and every fsynced block in it.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend_process_util.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "qemu_judge.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// One image to read through the mount: the shell commands that make it
// in the test's directory (their working directory), and its file name.
struct Recipe {
  std::string name;
  std::string commands;
};

std::vector<Recipe> Recipes() {
  const std::string fill =
      " -c 'write -P 0x5a 0 70k' -c 'write -P 0xa5 1m 3m' "
      "-c 'write -P 0x33 5000k 512' -c 'write -P 0x44 15m 1m'";
  return {
      {"v3_4k_empty.qcow2",
       "qemu-img create -q -f qcow2 -o cluster_size=4k v3_4k_empty.qcow2 16M"},
      {"v3_4k.qcow2",
       "qemu-img create -q -f qcow2 -o cluster_size=4k v3_4k.qcow2 16M && "
       "qemu-io" +
           fill + " v3_4k.qcow2"},
      {"v3_64k.qcow2",
       "qemu-img create -q -f qcow2 v3_64k.qcow2 16M && qemu-io" + fill +
           " v3_64k.qcow2"},
      {"v3_2m.qcow2",
       "qemu-img create -q -f qcow2 -o cluster_size=2M v3_2m.qcow2 16M && "
       "qemu-io" +
           fill + " v3_2m.qcow2"},
      {"v2_64k.qcow2",
       "qemu-img create -q -f qcow2 -o compat=0.10 v2_64k.qcow2 16M && "
       "qemu-io" +
           fill + " v2_64k.qcow2"},
      {"v2_4k.qcow2",
       "qemu-img create -q -f qcow2 -o compat=0.10,cluster_size=4k "
       "v2_4k.qcow2 16M && qemu-io" +
           fill + " v2_4k.qcow2"},
      {"prealloc.qcow2",
       "qemu-img create -q -f qcow2 -o preallocation=metadata prealloc.qcow2 "
       "16M && qemu-io" +
           fill + " prealloc.qcow2"},
      {"zeros.qcow2",
       "qemu-img create -q -f qcow2 zeros.qcow2 16M && qemu-io" + fill +
           " -c 'write -z 1m 1m' -c 'write -z 3m 4k' zeros.qcow2"},
      // Two levels: a 4 KiB-cluster top over a 64 KiB-cluster base; zero
      // clusters in the top hide the base's data.
      {"chain2.qcow2",
       "qemu-img create -q -f qcow2 c2base.qcow2 16M && qemu-io" + fill +
           " c2base.qcow2 && qemu-img create -q -f qcow2 -o cluster_size=4k "
           "-b c2base.qcow2 -F qcow2 chain2.qcow2 && qemu-io -c 'write -P "
           "0x77 1500k 9k' -c 'write -z 2m 64k' -c 'write -P 0x78 15m 4k' "
           "chain2.qcow2"},
      // Three levels down to a raw file smaller than the disk.
      {"chain3.qcow2",
       "head -c 10m /dev/urandom > c3base.raw && qemu-img create -q -f qcow2 "
       "-o cluster_size=2M -b c3base.raw -F raw c3mid.qcow2 16M && qemu-io "
       "-c 'write -P 0x21 3m 5m' -c 'write -P 0x22 9m 2m' c3mid.qcow2 && "
       "qemu-img create -q -f qcow2 -b c3mid.qcow2 -F qcow2 chain3.qcow2 && "
       "qemu-io -c 'write -P 0x23 4m 100k' -c 'write -z 6m 128k' "
       "chain3.qcow2"},
  };
}

TEST(Qcow2MountTest, EveryImageReadsAsQemuImgConvertShowsIt) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  std::vector<std::string> args;
  for (const Recipe& r : Recipes()) {
    ShOk("cd '" + dir.path() + "' && " + r.commands);
    args.insert(args.end(), {"--disk", dir.Path(r.name) + ",ro"});
  }
  Mount mount(dir.MakeDir("mnt"), args);
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  for (const Recipe& r : Recipes()) {
    const std::string expected = QemuRaw(dir, dir.Path(r.name));
    const std::string shown = ReadWholeFile(mount.Path(r.name));
    ASSERT_EQ(shown.size(), 16 * kMiB) << r.name;
    EXPECT_EQ(FirstDifference(expected, shown), "") << r.name;
  }
}

// (frontend, engine, placement, backend)
using WriteParam =
    std::tuple<std::string, std::string, std::string, std::string>;

class Qcow2WriteTest : public ::testing::TestWithParam<WriteParam> {};

// fio's verified writes into an empty image over a backing file: random
// 4 KiB writes allocate clusters and copy the rest of each from the
// backing file, then 64 KiB writes go to clusters allocated and not.
void FioVerifiedWritesJudgedByQemu(const std::vector<std::string>& options) {
  TempDir dir;
  ShOk("cd '" + dir.path() +
       "' && qemu-img create -q -f qcow2 base.qcow2 32M && qemu-io -c "
       "'write -P 0x6d 0 32m' base.qcow2 && qemu-img create -q -f qcow2 -b "
       "base.qcow2 -F qcow2 disk.qcow2");
  const std::string image = dir.Path("disk.qcow2");
  const std::string shown = dir.Path("shown.raw");
  {
    std::vector<std::string> args = {"--disk", image};
    args.insert(args.end(), options.begin(), options.end());
    Mount mount(dir.MakeDir("mnt"), args);
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    const std::string disk = mount.Path("disk.qcow2");
    for (const char* bs : {"4k", "64k"}) {
      ExpectFioClean(RunCommand(
          FioCommand(disk, {"--rw=randwrite", std::string("--bs=") + bs,
                            "--size=8m", "--offset=4m", "--iodepth=16",
                            "--verify=crc32c", "--do_verify=1"})));
    }
    // A pattern qemu-io must find, at an offset no fio job touched.
    {
      Fd fd = Open(disk, O_WRONLY);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), 20 * kMiB + 4096, std::string(12288, '\xab'));
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    }
    ShOk("cp '" + disk + "' '" + shown + "'");
  }
  ShOk("qemu-img check '" + image + "'");
  ShOk("qemu-img compare -f qcow2 -F raw '" + image + "' '" + shown + "'");
  ShOk("qemu-io -c 'read -P 0xab 20975616 12288' -c 'read -P 0x6d 20m 4k' '" +
       image + "'");
}

TEST_P(Qcow2WriteTest, FioVerifiedWritesPassQemuImgCheckAndCompare) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, engine, placement, backend] = GetParam();
  FioVerifiedWritesJudgedByQemu({"--frontend", frontend, "--engine", engine,
                                 "--placement", placement, "--backend",
                                 backend});
}

// The same through the classic FUSE channel (read()/write() on /dev/fuse).
TEST(Qcow2MountTest, FioVerifiedWritesOnClassicFuse) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  FioVerifiedWritesJudgedByQemu({"--fuse-io", "classic"});
}

// A raw backing file whose size is not a multiple of 512: its last partial
// sector reads as its bytes, then zeros, as qemu-img shows the disk.
TEST(Qcow2MountTest, RawBackingFileEndingInsideASectorReadsItsLastBytes) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  ShOk("cd '" + dir.path() +
       "' && head -c 1000300 /dev/urandom > base.raw && qemu-img create -q "
       "-f qcow2 -b base.raw -F raw disk.qcow2 2M");
  const std::string image = dir.Path("disk.qcow2");
  Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",ro"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string expected = QemuRaw(dir, image);
  const std::string shown = ReadWholeFile(mount.Path("disk.qcow2"));
  ASSERT_EQ(shown.size(), 2 * kMiB);
  EXPECT_EQ(FirstDifference(expected, shown), "");
  EXPECT_NE(expected.substr(1000300 / 512 * 512, 1000300 % 512),
            std::string(1000300 % 512, '\0'));
}

INSTANTIATE_TEST_SUITE_P(
    Placements, Qcow2WriteTest,
    ::testing::Values(
        WriteParam{"blkif", "uring", "backend-thread", "thread"},
        WriteParam{"virtio", "uring", "inline", "thread"},
        WriteParam{"virtio-packed", "sync", "backend-thread", "thread"},
        WriteParam{"blkif", "uring", "backend-thread", "process"}),
    [](const ::testing::TestParamInfo<WriteParam>& info) {
      return FrontendTestName(std::get<0>(info.param)) + "_" +
             std::get<1>(info.param) + "_" +
             FrontendTestName(std::get<2>(info.param)) + "_" +
             std::get<3>(info.param);
    });

// Discarded whole clusters become unallocated (no backing file) and their
// clusters go back: qemu-img map shows no data there, check no leak.
TEST(Qcow2MountTest, DiscardGivesClustersBack) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  const std::string image = dir.Path("disk.qcow2");
  ShOk("qemu-img create -q -f qcow2 '" + image + "' 16M");
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk.qcow2"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 0, std::string(8 * kMiB, '\x5c'));
    // Whole clusters [1 MiB, 3 MiB), and part of one more at its ends.
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        kMiB - 4096, 2 * kMiB + 8192),
              0)
        << std::strerror(errno);
    ASSERT_EQ(fsync(fd.get()), 0);
    const std::string got = PreadAll(fd.get(), 0, 8 * kMiB);
    std::string expected(8 * kMiB, '\x5c');
    expected.replace(kMiB - 4096, 2 * kMiB + 8192, 2 * kMiB + 8192, '\0');
    EXPECT_EQ(FirstDifference(expected, got), "");
  }
  CommandResult check = Sh("qemu-img check '" + image + "'");
  EXPECT_EQ(check.exit_code, 0) << check.Describe();
  EXPECT_EQ(check.out.find("leak"), std::string::npos) << check.out;
  CommandResult map = Sh("qemu-img map --output=json '" + image + "'");
  ASSERT_EQ(map.exit_code, 0) << map.Describe();
  EXPECT_NE(map.out.find("\"start\": 1048576, \"length\": 2097152, \"depth\": "
                         "0, \"present\": false, \"zero\": true, \"data\": "
                         "false"),
            std::string::npos)
      << map.out;
  ShOk("qemu-io -c 'read -P 0 1m 2m' -c 'read -P 0x5c 4m 1m' '" + image + "'");
}

// Rounds of the kill test: 3 in the suite; PVDISK_QCOW2_KILL_ROUNDS (at
// most 256: each round's block lies in the first 16 MiB, below the load)
// for a longer run.
int KillRounds() {
  const char* env = std::getenv("PVDISK_QCOW2_KILL_ROUNDS");
  const int rounds = env != nullptr ? std::atoi(env) : 3;
  return std::clamp(rounds, 1, 256);
}

// kill -9 during allocating writes: blocks fsynced before the load began
// read back, and qemu-img check finds leaks at worst (exit 0 or 3).
TEST(Qcow2MountTest, SigkillDuringAllocatingWritesLeaksAtWorst) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk.qcow2");
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=4k '" + image + "' 64M");
  for (int round = 0; round < KillRounds(); ++round) {
    const uint64_t at = static_cast<uint64_t>(round) * 64 * 1024;
    const std::string block = PatternBytes(round + 1, 64 * 1024);
    Mount mount(dir.MakeDir("mnt" + std::to_string(round)), {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    {
      Fd fd = Open(mount.Path("disk.qcow2"), O_WRONLY);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), at, block);
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    }
    BackgroundProcess fio(FioCommand(
        mount.Path("disk.qcow2"),
        {"--rw=randwrite", "--bs=4k", "--offset=16m", "--size=48m",
         "--iodepth=32", "--fsync=16", "--time_based", "--runtime=30"}));
    ASSERT_TRUE(fio.started());
    // Kill once the load has allocated clusters.
    ASSERT_TRUE(WaitUntil(
        [&] {
          // Flushes during the load commit the metadata journal: the kill
          // may land in a commit, between its stages.
          DiskStats stats = StatsOf(mount.mountpoint(), "disk.qcow2");
          return stats["reqs_write"] > 200 && stats["meta_writes"] > 0;
        },
        std::chrono::seconds(30)));
    ASSERT_NO_FATAL_FAILURE(KillDaemonUnderLoad(mount, fio));
    CommandResult check = Sh("qemu-img check '" + image + "'");
    EXPECT_TRUE(check.exit_code == 0 || check.exit_code == 3)
        << "round " << round << ": " << check.Describe();
    ShOk("qemu-img convert -O raw '" + image + "' '" + dir.Path("k.raw") + "'");
    Fd raw = Open(dir.Path("k.raw"), O_RDONLY);
    for (int r = 0; r <= round; ++r) {
      EXPECT_EQ(FirstDifference(PatternBytes(r + 1, 64 * 1024),
                                PreadAll(raw.get(), r * 64 * 1024, 64 * 1024)),
                "")
          << "round " << round << ", block of round " << r;
    }
    unlink(dir.Path("k.raw").c_str());
  }
}

// Writes that no flush covered are committed when the disk is unmounted
// (the journal goes with the state that served them), whether the backend
// is a thread or a process.
TEST(Qcow2MountTest, UnmountCommitsWritesNoFlushCovered) {
  PVDISK_REQUIRE_QEMU();
  for (const char* backend : {"thread", "process"}) {
    TempDir dir;
    const std::string image = dir.Path("disk.qcow2");
    ShOk("qemu-img create -q -f qcow2 '" + image + "' 16M");
    {
      Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--placement",
                                       "backend-thread", "--backend", backend});
      ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
      Fd fd = Open(mount.Path("disk.qcow2"), O_WRONLY);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), 3 * kMiB + 4096, std::string(200 * 1024, '\x3e'));
      if (std::string(backend) == "thread") {
        // A backend process commits before it answers (the next test).
        EXPECT_EQ(StatsOf(mount.mountpoint(), "disk.qcow2")["meta_writes"], 0u);
      }
    }
    CommandResult check = Sh("qemu-img check '" + image + "'");
    EXPECT_EQ(check.exit_code, 0) << backend << ": " << check.Describe();
    ShOk("qemu-io -c 'read -P 0x3e 3149824 204800' -c 'read -P 0 0 3m' '" +
         image + "'");
  }
}

// With an L2 cache of one table, tables whose new entries are only in the
// journal are evicted and read back: they read as the journal will leave
// them, before and after the commit.
TEST(Qcow2MountTest, TablesReadBackBeforeTheirCommitShowTheJournal) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  const std::string image = dir.Path("disk.qcow2");
  // 4 KiB clusters: one L2 table maps 2 MiB; the cache holds one.
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=4k '" + image + "' 16M");
  std::string expected(16 * kMiB, '\0');
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",l2_cache=4k"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk.qcow2"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    // Two rounds over every table: the second finds each table evicted.
    for (int round = 0; round < 2; ++round) {
      for (uint64_t table = 0; table < 8; ++table) {
        const uint64_t at = table * 2 * kMiB + (round + 1) * 12288;
        const std::string block = PatternBytes(table * 2 + round + 1, 8192);
        PwriteAll(fd.get(), at, block);
        expected.replace(at, block.size(), block);
      }
    }
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk.qcow2")["meta_writes"], 0u);
    EXPECT_EQ(FirstDifference(expected, PreadAll(fd.get(), 0, 16 * kMiB)), "");
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(expected, PreadAll(fd.get(), 0, 16 * kMiB)), "");
  }
  ShOk("qemu-img check '" + image + "'");
  EXPECT_EQ(FirstDifference(expected, QemuRaw(dir, image)), "");
}

// A backend process that dies is replaced without the applications
// noticing: the allocating writes it had answered, with no flush after
// them, still read back, from the new backend and after unmount.
TEST(Qcow2MountTest, AnsweredWritesSurviveABackendProcessDeath) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  const std::string image = dir.Path("disk.qcow2");
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=4k '" + image + "' 16M");
  const std::string block = PatternBytes(7, 256 * 1024);
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--placement",
                                     "backend-thread", "--backend", "process"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk.qcow2"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 5 * kMiB, block);
    ASSERT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), "disk.qcow2"));
    EXPECT_EQ(
        FirstDifference(block, PreadAll(fd.get(), 5 * kMiB, block.size())), "");
  }
  CommandResult check = Sh("qemu-img check '" + image + "'");
  EXPECT_TRUE(check.exit_code == 0 || check.exit_code == 3) << check.Describe();
  EXPECT_EQ(FirstDifference(block,
                            QemuRaw(dir, image).substr(5 * kMiB, block.size())),
            "");
}

// One sequential read pass over the mounted disk with O_DIRECT (so that
// every block reaches the disk, not the page cache).
void ReadPass(const std::string& disk) {
  ExpectFioClean(
      RunCommand(FioCommand(disk, {"--rw=read", "--bs=64k", "--iodepth=4"})));
}

// The per-queue qcow2 counters: allocations counted as qemu-img counts the
// clusters, and a read pass after a warm-up one misses no L2 table with the
// default cache (which holds them all), but does with a cache of one table.
TEST(Qcow2MountTest, CountersShowAllocationsAndL2CacheHits) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk.qcow2");
  // 4 KiB clusters: one L2 table maps 2 MiB, so the disk has 8 tables.
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=4k '" + image + "' 16M");
  uint64_t allocated = 0;
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    const std::string disk = mount.Path("disk.qcow2");
    ExpectFioClean(
        RunCommand(FioCommand(disk, {"--rw=randwrite", "--bs=4k", "--size=3m",
                                     "--offset=5m", "--iodepth=8"})));
    const DiskStats written = StatsOf(mount.mountpoint(), "disk.qcow2");
    allocated = written["clusters_allocated"];
    EXPECT_EQ(allocated, 3 * kMiB / 4096);
    // Write-back metadata: nothing is written until a flush commits it.
    EXPECT_EQ(written["meta_writes"], 0u);
    {
      Fd f = Open(disk, O_RDWR);
      ASSERT_EQ(fsync(f.get()), 0) << strerror(errno);
    }
    const DiskStats flushed = StatsOf(mount.mountpoint(), "disk.qcow2");
    // Refcounts, then L2 entries: the counts of consecutive clusters and
    // the entries of one table each go out as one merged write, far fewer
    // than one per cluster.
    EXPECT_GE(flushed["meta_writes"], 2u);
    EXPECT_LT(flushed["meta_writes"], allocated / 8);
    ReadPass(disk);
    const DiskStats warm = StatsOf(mount.mountpoint(), "disk.qcow2");
    ReadPass(disk);
    const DiskStats again = StatsOf(mount.mountpoint(), "disk.qcow2");
    EXPECT_EQ(again["l2_misses"], warm["l2_misses"]);
    EXPECT_GT(again["l2_hits"], warm["l2_hits"]);
  }
  CommandResult check = Sh("qemu-img check --output=json '" + image + "'");
  ASSERT_EQ(check.exit_code, 0) << check.Describe();
  EXPECT_NE(check.out.find(
                "\"allocated-clusters\": " + std::to_string(allocated) + ","),
            std::string::npos)
      << check.out;
  {
    Mount mount(dir.MakeDir("mnt1"), {"--disk", image + ",l2_cache=4k"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    ReadPass(mount.Path("disk.qcow2"));
    const DiskStats warm = StatsOf(mount.mountpoint(), "disk.qcow2");
    ReadPass(mount.Path("disk.qcow2"));
    const DiskStats again = StatsOf(mount.mountpoint(), "disk.qcow2");
    EXPECT_GT(again["l2_misses"], warm["l2_misses"]);
    EXPECT_GT(again["meta_reads"], warm["meta_reads"]);
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
