// A volatile write cache (--disk IMG,cache=volatile) in a backend process
// (--backend process), where the disk's I/O is done:
// - fio verifies through it, its counters reach the stats, and unmount
//   writes out what it holds (the image is the disk as last read);
// - `pvdisk powercut --keep none|all|random` cuts it as with backend
//   threads: the same workload gives the same output, counters and image
//   on both, every fsynced block is in it, and I/O after the cut fails with
//   EIO;
// - kill -9 of its backend process is the disk's power cut: no restart,
//   I/O fails with EIO (no hang), the stats say so, a disk of the same
//   mount without the cache still restarts its backend, and after the
//   reboot (unmount, mount) every fsynced block reads back.
// The write log's side is in write_log_test.cc, qcow2's in
// tests/image/qcow2_powercut_test.cc.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend_process_util.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlock = 4096;
constexpr uint64_t kDiskBlocks = 256;  // a 1 MiB disk
// The workload: kSynced blocks at even indices, fsynced; then kHeld blocks
// at odd indices, never flushed (not adjacent, so none merge).
constexpr uint64_t kSynced = 64;
constexpr uint64_t kHeld = 32;

std::string SyncedBlock(uint64_t i) { return PatternBytes(100 + i, kBlock); }
std::string HeldBlock(uint64_t i) { return PatternBytes(5000 + i, kBlock); }

// One block written with O_DIRECT (one request, in program order): 0 or
// errno.
int WriteBlock(int fd, uint64_t index, const std::string& data) {
  void* buffer = nullptr;
  if (posix_memalign(&buffer, kBlock, kBlock) != 0) return ENOMEM;
  std::unique_ptr<void, decltype(&free)> owned(buffer, &free);
  std::memcpy(buffer, data.data(), kBlock);
  const ssize_t n =
      pwrite(fd, buffer, kBlock, static_cast<off_t>(index * kBlock));
  if (n == static_cast<ssize_t>(kBlock)) return 0;
  return n < 0 ? errno : EIO;
}

int ReadBlock(int fd, uint64_t index) {
  void* buffer = nullptr;
  if (posix_memalign(&buffer, kBlock, kBlock) != 0) return ENOMEM;
  std::unique_ptr<void, decltype(&free)> owned(buffer, &free);
  const ssize_t n =
      pread(fd, buffer, kBlock, static_cast<off_t>(index * kBlock));
  if (n == static_cast<ssize_t>(kBlock)) return 0;
  return n < 0 ? errno : EIO;
}

// Writes the synced blocks and fsyncs, then the held blocks.
void WriteSyncedThenHeld(int fd) {
  for (uint64_t i = 0; i < kSynced; ++i) {
    ASSERT_EQ(WriteBlock(fd, 2 * i, SyncedBlock(i)), 0);
  }
  ASSERT_EQ(fsync(fd), 0) << std::strerror(errno);
  for (uint64_t i = 0; i < kHeld; ++i) {
    ASSERT_EQ(WriteBlock(fd, 2 * i + 1, HeldBlock(i)), 0);
  }
}

// What the image holds of the workload: every synced block must be there;
// each held block is whole or zeros. Returns how many held blocks it has.
uint64_t CheckImage(const std::string& bytes) {
  EXPECT_EQ(bytes.size(), kDiskBlocks * kBlock);
  uint64_t kept = 0;
  for (uint64_t i = 0; i < kSynced; ++i) {
    EXPECT_TRUE(bytes.substr(2 * i * kBlock, kBlock) == SyncedBlock(i))
        << "fsynced block " << 2 * i << " lost";
  }
  for (uint64_t i = 0; i < kHeld; ++i) {
    const std::string block = bytes.substr((2 * i + 1) * kBlock, kBlock);
    if (block == HeldBlock(i)) {
      ++kept;
    } else {
      EXPECT_EQ(block, std::string(kBlock, '\0'))
          << "held block " << 2 * i + 1 << " is neither its write nor zeros";
    }
  }
  return kept;
}

std::vector<std::string> CacheArgs(const std::string& image,
                                   const std::string& backend) {
  return {"--disk", image + ",cache=volatile", "--backend", backend, "--queues",
          "1"};
}

// fio verify through the cache of a backend process, with fsyncs; its
// counters in the stats; what the disk read at the end is in the image
// after unmount (the backend writes the cache out when it stops).
TEST(BackendProcessCacheTest, FioVerifiesAndUnmountWritesTheCacheOut) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  std::string disk;
  {
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image + ",cache=volatile,cache_size=4M", "--backend",
                 "process", "--queues", "2", "--backend-threads", "2"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    CommandResult fio =
        RunCommand(FioCommand(mount.Path("disk0.img"),
                              {"--rw=randrw", "--bsrange=4k-256k", "--size=32M",
                               "--iodepth=16", "--fsync=32", "--verify=crc32c",
                               "--do_verify=1"}),
                   std::chrono::seconds(180));
    ExpectFioClean(fio);
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats.config["backend"], "process");
    EXPECT_EQ(stats.config["cache"], "volatile");
    EXPECT_EQ(stats.config["cache_size"], std::to_string(4 * kMiB));
    EXPECT_EQ(stats.config["power"], "on");
    EXPECT_GT(stats["flushes"], 0u);
    EXPECT_GT(stats["unsafe_bytes_max"], 0u);
    // A 4 MiB cache under 32 MiB of writes: full write-outs too.
    EXPECT_GT(stats["full_flushes"], 0u);
    // A reset reaches the backend's counts.
    ResetStats(mount.mountpoint());
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["flushes"], 0u);
    Fd fd = Open(mount.Path("disk0.img"), O_RDONLY);
    ASSERT_TRUE(fd.valid());
    disk = PreadAll(fd.get(), 0, 64 * kMiB);
    fd.Close();
    ASSERT_EQ(mount.Unmount().exit_code, 0);
  }
  Fd raw = Open(image, O_RDONLY);
  ASSERT_TRUE(raw.valid());
  EXPECT_TRUE(PreadAll(raw.get(), 0, 64 * kMiB) == disk)
      << "the image after unmount is not the disk as read before it";
}

// What one run of the power-cut workload gave.
struct CutRun {
  std::string output;  // pvdisk powercut's stdout
  uint64_t unsafe_bytes = 0;
  uint64_t flushes = 0;
  std::string config_after;  // power and cut_* lines of the stats header
  std::string image;
  int read_after = 0;  // errno of a read after the cut
  int write_after = 0;
};

CutRun RunCut(const TempDir& dir, const std::string& backend,
              const std::string& keep) {
  CutRun run;
  const std::string image = dir.Path(backend + "-" + keep + ".img");
  CreateImage(image, kDiskBlocks * kBlock);
  const std::string name = backend + "-" + keep + ".img";
  {
    Mount mount(dir.MakeDir("mnt-" + backend + "-" + keep),
                CacheArgs(image, backend));
    EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
    if (!mount.ok()) return run;
    Fd fd = Open(mount.Path(name), O_RDWR | O_DIRECT);
    EXPECT_TRUE(fd.valid()) << std::strerror(errno);
    WriteSyncedThenHeld(fd.get());
    DiskStats before = StatsOf(mount.mountpoint(), name);
    run.unsafe_bytes = before["unsafe_bytes"];
    run.flushes = before["flushes"];
    std::vector<std::string> args = {"powercut", mount.mountpoint(), name,
                                     "--keep", keep};
    if (keep == "random") args.insert(args.end(), {"--seed", "7"});
    CommandResult cut = RunPvdisk(args);
    EXPECT_EQ(cut.exit_code, 0) << cut.Describe();
    run.output = cut.out;
    // The name of the disk differs between the runs: not its cut.
    if (size_t at = run.output.find(':'); at != std::string::npos) {
      run.output.erase(0, at);
    }
    run.read_after = ReadBlock(fd.get(), 0);
    run.write_after = WriteBlock(fd.get(), 0, HeldBlock(99));
    DiskStats after = StatsOf(mount.mountpoint(), name);
    for (const char* key : {"power", "cut_dropped_writes", "cut_dropped_bytes",
                            "cut_kept_writes", "cut_kept_bytes"}) {
      run.config_after += std::string(key) + "=" + after.config[key] + "\n";
    }
    fd.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  Fd raw = Open(image, O_RDONLY);
  EXPECT_TRUE(raw.valid());
  run.image = PreadAll(raw.get(), 0, kDiskBlocks * kBlock);
  return run;
}

class BackendProcessPowercutTest
    : public ::testing::TestWithParam<std::string> {};

// The same workload and cut on backend threads and in a backend process:
// the same powercut output, counters and image, as the model allows.
TEST_P(BackendProcessPowercutTest, CutsAsBackendThreadsDo) {
  PVDISK_REQUIRE_FUSE();
  const std::string keep = GetParam();
  TempDir dir;
  const CutRun thread = RunCut(dir, "thread", keep);
  const CutRun process = RunCut(dir, "process", keep);
  EXPECT_EQ(process.unsafe_bytes, kHeld * kBlock);
  EXPECT_EQ(process.unsafe_bytes, thread.unsafe_bytes);
  EXPECT_GE(process.flushes, 1u);
  EXPECT_EQ(process.flushes, thread.flushes);
  EXPECT_EQ(process.output, thread.output);
  EXPECT_NE(process.output.find("power cut; dropped"), std::string::npos)
      << process.output;
  EXPECT_EQ(process.config_after, thread.config_after);
  EXPECT_NE(process.config_after.find("power=cut"), std::string::npos);
  EXPECT_EQ(process.read_after, EIO);
  EXPECT_EQ(process.write_after, EIO);
  const uint64_t kept = CheckImage(process.image);
  EXPECT_TRUE(process.image == thread.image)
      << "the cut left another image than with backend threads";
  if (keep == "none") {
    EXPECT_EQ(kept, 0u);
  } else if (keep == "all") {
    EXPECT_EQ(kept, kHeld);
  }
  EXPECT_NE(process.config_after.find(
                "cut_kept_writes=" + std::to_string(kept) + "\n"),
            std::string::npos)
      << process.config_after;
}

INSTANTIATE_TEST_SUITE_P(Keep, BackendProcessPowercutTest,
                         ::testing::Values("none", "all", "random"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// kill -9 of the backend process of a disk with the cache is its power
// cut: I/O fails with EIO at once, the stats show it, a power cut is
// refused as done already; a disk of the same mount without the cache
// restarts as before; after the reboot every fsynced block reads back.
TEST(BackendProcessCacheTest, KilledBackendIsThePowerCut) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("cached.img");
  const std::string plain = dir.Path("plain.img");
  CreateImage(image, kDiskBlocks * kBlock);
  CreateImage(plain, kDiskBlocks * kBlock);
  const std::string mnt = dir.MakeDir("mnt");
  {
    Mount mount(mnt, {"--disk", image + ",cache=volatile", "--disk", plain,
                      "--backend", "process", "--queues", "1"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("cached.img"), O_RDWR | O_DIRECT);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    WriteSyncedThenHeld(fd.get());
    EXPECT_EQ(StatsOf(mnt, "cached.img")["unsafe_bytes"], kHeld * kBlock);
    const pid_t pid = BackendPid(mnt, "cached.img");
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0) << std::strerror(errno);
    ASSERT_TRUE(
        WaitUntil([&] { return BackendState(mnt, "cached.img") == "failed"; },
                  kBackendRestartTimeout))
        << BackendState(mnt, "cached.img");
    // No restart: the pid stays gone, I/O fails (the Mount's watchdog
    // would catch a hang).
    DiskStats stats = StatsOf(mnt, "cached.img");
    EXPECT_EQ(stats.config["backend_pid"], "-1");
    EXPECT_EQ(stats.config["power"], "cut");
    EXPECT_EQ(stats["backend_restarts"], 0u);
    EXPECT_EQ(ReadBlock(fd.get(), 0), EIO);
    EXPECT_EQ(WriteBlock(fd.get(), 0, HeldBlock(99)), EIO);
    EXPECT_EQ(fsync(fd.get()), -1);
    fd.Close();
    CommandResult again = RunPvdisk({"powercut", mnt, "cached.img"});
    ExpectUsageError(again);
    EXPECT_NE(again.err.find("lost its power already"), std::string::npos)
        << again.Describe();
    // The disk without the cache restarts its backend and serves on.
    Fd other = Open(mount.Path("plain.img"), O_RDWR);
    ASSERT_TRUE(other.valid());
    PwriteAll(other.get(), 0, "still here");
    ASSERT_EQ(fsync(other.get()), 0);
    EXPECT_TRUE(KillBackendAndWaitForNew(mnt, "plain.img"));
    EXPECT_EQ(PreadAll(other.get(), 0, 10), "still here");
    other.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  // The reboot: every fsynced block reads back through a new mount.
  Mount mount(mnt, CacheArgs(image, "process"));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  EXPECT_EQ(StatsOf(mnt, "cached.img").config["power"], "on");
  Fd fd = Open(mount.Path("cached.img"), O_RDONLY);
  ASSERT_TRUE(fd.valid());
  const uint64_t kept = CheckImage(PreadAll(fd.get(), 0, kDiskBlocks * kBlock));
  // Nothing started a write-out of the held blocks (no flush, the cache
  // far from full): they died with the process.
  EXPECT_EQ(kept, 0u);
  fd.Close();
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

}  // namespace
}  // namespace pvdisk::fuse_testing
