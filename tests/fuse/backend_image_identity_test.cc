// --backend process serves the file the daemon opened, whatever becomes of
// its path: each backend process, the restarted ones too, gets the image as
// a descriptor from the daemon, never as a name to open. Renaming the image,
// removing it or putting another file at its path between backend kills
// changes nothing: reads and writes go to the original inode, which the
// image lock and the I/O fence are on too. Real mounts, real SIGKILLs.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "backend_process_util.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr size_t kBlock = 4096;

// A file's identity as /proc/locks shows it: "MAJ:MIN:INODE", the device
// numbers in hex (at least two digits), the inode in decimal.
std::string LockIdOf(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  char id[64];
  snprintf(id, sizeof(id), "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
           static_cast<unsigned long long>(st.st_ino));
  return id;
}

// One block through the mount with O_DIRECT, so that it comes from the
// backend and not from the page cache.
std::string ReadBlockDirect(const std::string& path, uint64_t offset) {
  Fd fd = Open(path, O_RDONLY | O_DIRECT);
  EXPECT_TRUE(fd.valid()) << path << ": " << std::strerror(errno);
  void* buffer = nullptr;
  if (posix_memalign(&buffer, kBlock, kBlock) != 0) return "";
  ssize_t got = pread(fd.get(), buffer, kBlock, static_cast<off_t>(offset));
  EXPECT_EQ(got, static_cast<ssize_t>(kBlock)) << std::strerror(errno);
  std::string data(static_cast<char*>(buffer),
                   got > 0 ? static_cast<size_t>(got) : 0);
  free(buffer);
  return data;
}

// One block of `fill` through the mount with O_DIRECT, then fsync.
void WriteBlockDirect(const std::string& path, uint64_t offset, char fill) {
  Fd fd = Open(path, O_RDWR | O_DIRECT);
  ASSERT_TRUE(fd.valid()) << path << ": " << std::strerror(errno);
  void* buffer = nullptr;
  ASSERT_EQ(posix_memalign(&buffer, kBlock, kBlock), 0);
  std::memset(buffer, fill, kBlock);
  ssize_t put = pwrite(fd.get(), buffer, kBlock, static_cast<off_t>(offset));
  int error = errno;
  free(buffer);
  ASSERT_EQ(put, static_cast<ssize_t>(kBlock)) << std::strerror(error);
  ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
}

// The bytes [offset, offset + length) of a file outside the mount.
std::string ReadFileRange(const std::string& path, uint64_t offset,
                          uint64_t length) {
  Fd fd = Open(path, O_RDONLY);
  EXPECT_TRUE(fd.valid()) << path << ": " << std::strerror(errno);
  if (!fd.valid()) return "";
  return PreadAll(fd.get(), offset, length);
}

bool AllZero(const std::string& data) {
  return std::all_of(data.begin(), data.end(), [](char c) { return c == 0; });
}

// OFD locks on the file `lock_id` (LockIdOf) from /proc/locks whose range
// overlaps [first, last] (lines "N: OFDLCK ADVISORY READ -1 MAJ:MIN:INODE
// START END"; the kernel shows one line per range an open file description
// holds, adjacent bytes merged).
int OfdLocksOn(const std::string& lock_id, uint64_t first, uint64_t last) {
  std::ifstream locks("/proc/locks");
  int count = 0;
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string id, kind, mode, type, pid, device, start, end;
    fields >> id >> kind >> mode >> type >> pid >> device >> start >> end;
    if (kind != "OFDLCK" || device != lock_id) continue;
    const uint64_t from = std::stoull(start);
    const uint64_t to = end == "EOF" ? UINT64_MAX : std::stoull(end);
    if (from <= last && to >= first) ++count;
  }
  return count;
}

// QEMU's image lock bytes (io/image_lock.h) and byte 101, "holds write".
constexpr uint64_t kLockBytesFirst = 100;
constexpr uint64_t kLockBytesLast = 299;
constexpr uint64_t kHoldsWriteByte = 101;
// The I/O fence bytes start at 1 TiB (transport/process/io_fence.cc).
constexpr uint64_t kFenceBytesFirst = uint64_t{1} << 40;

// After the image is moved away and a new image is created at its path, a
// restarted backend still reads and writes the moved image, holds the image
// lock and the fence on it, and leaves the new file alone.
TEST(BackendImageIdentityTest, RestartedBackendServesTheMovedImage) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("p.img");
  const std::string moved = dir.Path("p_old.img");
  CreateImage(image, 64 * kMiB);
  const std::string original = LockIdOf(image);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--backend", "process"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string disk = mount.Path("p.img");
  WriteBlockDirect(disk, 0, 'A');

  ASSERT_EQ(rename(image.c_str(), moved.c_str()), 0) << std::strerror(errno);
  CreateImage(image, 64 * kMiB);
  const std::string replacement = LockIdOf(image);
  ASSERT_NE(original, replacement);
  ASSERT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), "p.img"));

  const std::string a_block(kBlock, 'A');
  const std::string b_block(kBlock, 'B');
  EXPECT_EQ(FirstDifference(a_block, ReadBlockDirect(disk, 0)), "")
      << "read through the mount";
  WriteBlockDirect(disk, 8192, 'B');
  EXPECT_EQ(FirstDifference(a_block, ReadFileRange(moved, 0, kBlock)), "")
      << "the moved image at 0";
  EXPECT_EQ(FirstDifference(b_block, ReadFileRange(moved, 8192, kBlock), 8192),
            "")
      << "the moved image at 8192";
  EXPECT_TRUE(AllZero(ReadFileRange(image, 0, 4 * kBlock)))
      << "the new file at the image's path was written";

  // The new backend's open is of the original inode: it holds the image
  // lock beside the daemon's (two holders of "write") and the fence there;
  // the new file is locked by nobody.
  EXPECT_EQ(OfdLocksOn(original, kHoldsWriteByte, kHoldsWriteByte), 2);
  EXPECT_EQ(OfdLocksOn(original, kFenceBytesFirst, UINT64_MAX >> 1), 1);
  EXPECT_EQ(OfdLocksOn(replacement, 0, UINT64_MAX >> 1), 0);

  DiskStats stats = StatsOf(mount.mountpoint(), "p.img");
  EXPECT_EQ(stats.config["backend_state"], "running");
  EXPECT_EQ(stats.config["image"], image);
  EXPECT_EQ(stats["backend_restarts"], 1u);
  EXPECT_EQ(stats["errors"], 0u);
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  // Both the daemon and its backend let go of the image lock by the time
  // the unmount returns.
  EXPECT_EQ(OfdLocksOn(original, kLockBytesFirst, kLockBytesLast), 0);
}

// fio writes and verifies while the image's path is renamed, then removed,
// then taken by a new file, with a backend kill after each: fio sees no
// error and every block verifies, the disk never fails, the data is in the
// original inode (kept reachable by a hard link made before the mount), and
// the files that took the path are never written.
TEST(BackendImageIdentityTest, PathChangesBetweenBackendKillsUnderFioVerify) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  const std::string moved = dir.Path("moved.img");
  const std::string witness = dir.Path("witness.img");
  CreateImage(image, 64 * kMiB);
  ASSERT_EQ(link(image.c_str(), witness.c_str()), 0) << std::strerror(errno);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--backend", "process"},
              std::chrono::seconds(150));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  // 4096 writes of 4 KiB at 1500 per second, then as many verifying reads:
  // about 5.5 s of I/O with requests in flight all along.
  BackgroundProcess fio(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randwrite", "--bs=4k", "--size=16M", "--iodepth=16",
                  "--rate_iops=1500", "--verify=crc32c", "--do_verify=1"}));
  ASSERT_TRUE(fio.started());
  // Before each change of the path, the disk has done I/O since the last
  // backend came (fio's writes, later its verifying reads).
  uint64_t sectors = 0;
  auto io_goes_on = [&] {
    bool moved_on = WaitUntil(
        [&] {
          DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
          return stats["sectors_written"] + stats["sectors_read"] > sectors;
        },
        std::chrono::seconds(30));
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    sectors = stats["sectors_written"] + stats["sectors_read"];
    return moved_on;
  };

  ASSERT_TRUE(io_goes_on()) << "fio's writes never arrived";
  ASSERT_EQ(rename(image.c_str(), moved.c_str()), 0) << std::strerror(errno);
  ASSERT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), "disk0.img"));
  EXPECT_TRUE(io_goes_on());
  ASSERT_EQ(unlink(moved.c_str()), 0) << std::strerror(errno);
  ASSERT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), "disk0.img"));
  EXPECT_TRUE(io_goes_on());
  CreateImage(image, 64 * kMiB);
  ASSERT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), "disk0.img"));

  ASSERT_TRUE(fio.Wait(std::chrono::seconds(120))) << "fio did not finish";
  ExpectFioClean(fio.result());
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["backend_state"], "running");
  EXPECT_EQ(stats["backend_restarts"], 3u);
  EXPECT_EQ(stats["errors"], 0u);

  // What the disk serves is the original inode's contents, which fio wrote.
  std::string served;
  {
    Fd fd = Open(mount.Path("disk0.img"), O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    served = PreadAll(fd.get(), 0, 16 * kMiB);
  }
  const std::string original = ReadFileRange(witness, 0, 16 * kMiB);
  EXPECT_FALSE(AllZero(original)) << "fio's writes did not reach the image";
  EXPECT_EQ(FirstDifference(original, served), "");
  EXPECT_TRUE(AllZero(ReadFileRange(image, 0, 16 * kMiB)))
      << "the new file at the image's path was written";
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
}

// The backend holds the image lock on its own open too: a daemon killed
// with SIGKILL while writing leaves its backend to die (the kernel kills it
// with its parent) and its I/O to drain, and the image is locked until
// then. That takes far less than the lock's grace, so the next mount of the
// image, right away, succeeds.
TEST(BackendImageIdentityTest, ImageIsFreeSoonAfterAKilledDaemonAndItsBackend) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string mountpoint = dir.MakeDir("mnt");
  pid_t backend = -1;
  {
    Mount killed(mountpoint, {"--disk", image, "--backend", "process"});
    ASSERT_TRUE(killed.ok()) << killed.mount_result().Describe();
    backend = BackendPid(mountpoint, "disk0.img");
    ASSERT_GT(backend, 0);
    Fd fd = Open(killed.Path("disk0.img"), O_WRONLY | O_DIRECT);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    std::atomic<bool> failed{false};
    std::thread writer([&] {
      void* buffer = nullptr;
      if (posix_memalign(&buffer, kBlock, kMiB) != 0) return;
      std::memset(buffer, 0x5a, kMiB);
      for (uint64_t i = 0; !failed; ++i) {
        if (pwrite(fd.get(), buffer, kMiB, (i % 16) * kMiB) < 0) failed = true;
      }
      free(buffer);
    });
    EXPECT_TRUE(WaitUntil(
        [&] { return StatsOf(mountpoint, "disk0.img")["fuse_writes"] > 0; },
        std::chrono::seconds(30)));
    kill(killed.daemon_pid(), SIGKILL);
    writer.join();  // the dead connection fails the next write
    fd.Close();
    CommandResult detached = killed.Unmount();
    EXPECT_EQ(detached.exit_code, 0) << detached.Describe();
  }
  Mount again(mountpoint, {"--disk", image, "--backend", "process"});
  EXPECT_TRUE(again.ok()) << again.mount_result().Describe();
  EXPECT_TRUE(
      WaitUntil([&] { return ProcessGone(backend); }, std::chrono::seconds(10)))
      << "the killed daemon's backend lives on";
}

}  // namespace
}  // namespace pvdisk::fuse_testing
