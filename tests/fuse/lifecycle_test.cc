// How a mount ends: pvdisk unmount with a file still open, fusermount3,
// a killed daemon, and a mount in the foreground.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Polls `condition` every 10 ms for up to `timeout`.
template <typename Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string ImageRange(const std::string& image, uint64_t offset,
                       uint64_t length) {
  Fd fd = Open(image, O_RDONLY);
  EXPECT_TRUE(fd.valid()) << image << ": " << std::strerror(errno);
  return fd.valid() ? PreadAll(fd.get(), offset, length) : "";
}

TEST(LifecycleTest, UnmountWithAnIdleOpenFileSucceeds) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  const std::string data = PatternBytes(91, 12345);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  PwriteAll(fd.get(), 3 * kMiB + 1, data);

  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_FALSE(IsMounted(mount.mountpoint()));
  EXPECT_FALSE(PvdiskProcessAlive(mount.daemon_pid()));
  // The program holding the file now gets errors, not a hang.
  char byte;
  errno = 0;
  EXPECT_EQ(pread(fd.get(), &byte, 1, 0), -1);
  EXPECT_NE(errno, 0);
  fd.Close();
  EXPECT_EQ(FirstDifference(data, ImageRange(image, 3 * kMiB + 1, data.size())),
            "");
}

TEST(LifecycleTest, FusermountUnmountStopsTheDaemon) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  const std::string data = PatternBytes(92, 7777);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  {
    Fd fd = Open(mount.Path("disk0.img"), O_WRONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 511, data);
  }
  CommandResult fusermount =
      RunCommand({"fusermount3", "-u", mount.mountpoint()});
  EXPECT_EQ(fusermount.exit_code, 0) << fusermount.Describe();
  EXPECT_FALSE(IsMounted(mount.mountpoint()));
  EXPECT_TRUE(WaitFor([&] { return !PvdiskProcessAlive(mount.daemon_pid()); },
                      std::chrono::seconds(10)))
      << "the daemon still runs after its mount went away";
  EXPECT_EQ(FirstDifference(data, ImageRange(image, 511, data.size())), "");
}

TEST(LifecycleTest, UnmountDetachesTheMountOfAKilledDaemon) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  ASSERT_EQ(kill(mount.daemon_pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return !PvdiskProcessAlive(mount.daemon_pid()); },
                      std::chrono::seconds(10)));
  ASSERT_TRUE(IsMounted(mount.mountpoint()));
  struct stat st;
  errno = 0;
  EXPECT_EQ(stat(mount.Path("disk0.img").c_str(), &st), -1);
  // ECONNABORTED if the call raced with the kernel aborting the connection;
  // on the uring channel ECANCELED if it landed on a ring queue whose owner
  // had died (the kernel's teardown cancels such requests).
  EXPECT_TRUE(errno == ENOTCONN || errno == ECONNABORTED ||
              errno == ECANCELED)
      << std::strerror(errno);

  // Mounting again is refused with advice; unmount detaches the dead mount.
  CommandResult again =
      RunPvdisk({"mount", mount.mountpoint(), "--disk", image});
  EXPECT_EQ(again.exit_code, 2) << again.Describe();
  EXPECT_EQ(again.err.rfind("pvdisk: ", 0), 0u) << again.Describe();
  EXPECT_NE(again.err.find("fusermount3 -u"), std::string::npos)
      << again.Describe();
  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_FALSE(IsMounted(mount.mountpoint()));

  // And the directory can be mounted again.
  Mount remount(mount.mountpoint(), {"--disk", image});
  EXPECT_TRUE(remount.ok()) << remount.mount_result().Describe();
}

TEST(LifecycleTest, ForegroundMountServesUntilUnmounted) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  const std::string mnt = dir.MakeDir("mnt");
  BackgroundProcess daemon(WithTestFuseIo(
      {PvdiskBinary(), "mount", mnt, "--disk", image, "--foreground"}));
  ASSERT_TRUE(daemon.started());
  ASSERT_TRUE(WaitFor([&] { return IsMounted(mnt); }, std::chrono::seconds(30)))
      << "not mounted";
  EXPECT_FALSE(daemon.Wait(std::chrono::milliseconds(0)))
      << "--foreground returned: " << daemon.result().Describe();

  const std::string data = PatternBytes(93, 4096);
  {
    Fd fd = Open(mnt + "/disk0.img", O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), kMiB, data);
    EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), kMiB, data.size())), "");
  }
  CommandResult unmounted = RunPvdisk({"unmount", mnt});
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  ASSERT_TRUE(daemon.Wait(std::chrono::seconds(30)))
      << "the foreground mount did not end";
  EXPECT_EQ(daemon.result().exit_code, 0) << daemon.result().Describe();
  EXPECT_NE(daemon.result().out.find("pvdisk: serving 1 disk(s) at " + mnt),
            std::string::npos)
      << daemon.result().Describe();
  EXPECT_FALSE(IsMounted(mnt));
  EXPECT_EQ(FirstDifference(data, ImageRange(image, kMiB, data.size())), "");
}

TEST(LifecycleTest, DiskFileKeepsItsSize) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  const uint64_t size = 8 * kMiB;
  CreateImage(image, size);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string disk = mount.Path("disk0.img");
  EXPECT_EQ(truncate(disk.c_str(), static_cast<off_t>(size)), 0)
      << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(truncate(disk.c_str(), static_cast<off_t>(size - 512)), -1);
  EXPECT_EQ(errno, EINVAL) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(truncate(disk.c_str(), static_cast<off_t>(size + 512)), -1);
  EXPECT_EQ(errno, EINVAL) << std::strerror(errno);
  // Opening with O_TRUNC (a shell's `>`) may be refused or ignored, as on a
  // block device, but must not empty the disk.
  const std::string data = PatternBytes(94, 4096);
  {
    Fd fd = Open(disk, O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 0, data);
  }
  { Fd truncated = Open(disk, O_WRONLY | O_TRUNC); }
  {
    Fd fd = Open(disk, O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), 0, data.size())), "")
        << "open(O_TRUNC) changed the data";
  }
  struct stat st;
  ASSERT_EQ(stat(disk.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
  ASSERT_EQ(stat(image.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
}

}  // namespace
}  // namespace pvdisk::fuse_testing
