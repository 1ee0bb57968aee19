// Unmount while overlapping unaligned writes are queued behind one another
// on different queues (issue 10, defect 1): every run must unmount in
// bounded time, answer every write fio issued (done or failed), and leave
// an image that holds exactly what fio wrote.
#include <fcntl.h>
#include <signal.h>

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
// fio writes 100-byte blocks at multiples of 100 inside the first 4 KiB:
// every one is a read-modify-write, and neighbours share sectors.
constexpr uint64_t kBlockSize = 100;
constexpr uint64_t kWrittenBytes = 4096 / kBlockSize * kBlockSize;  // 4000
constexpr char kFioByte = '\xab';
// The issue saw a hang in 2 of 3 runs on main; five runs miss it with a
// probability of about 1 in 250.
constexpr int kRuns = 5;

TEST(UnmountDrainTest, UnmountFinishesWithUnalignedWritesQueuedOnEveryQueue) {
  PVDISK_REQUIRE_FIO();
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run + 1) + " of " +
                 std::to_string(kRuns));
    TempDir dir;
    const std::string image = dir.Path("disk0.img");
    const uint64_t size = 8 * kMiB;
    CreateImage(image, size);
    Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--queues", "2",
                                     "--queue-map", "round-robin"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    BackgroundProcess fio(
        {"fio", "--name=rmw", "--filename=" + mount.Path("disk0.img"),
         "--size=4k", "--bs=" + std::to_string(kBlockSize), "--rw=randwrite",
         "--ioengine=libaio", "--iodepth=32", "--direct=1", "--numjobs=2",
         "--time_based", "--runtime=30", "--buffer_pattern=0xab"});
    ASSERT_TRUE(fio.started());
    // Let the writes pile up behind each other on both queues (the issue
    // unmounted after 3 s).
    ASSERT_TRUE(WaitUntil(
        [&] {
          return StatsOf(mount.mountpoint(), "disk0.img")["fuse_writes"] > 2000;
        },
        std::chrono::seconds(60)))
        << "fio did not get going";
    std::this_thread::sleep_for(std::chrono::seconds(1));

    CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
    if (unmounted.timed_out) {
      // The daemon hangs: kill it so that the clean-up is quick, and stop.
      kill(mount.daemon_pid(), SIGKILL);
      FAIL() << "pvdisk unmount did not finish within 30 s with writes in "
                "flight: "
             << unmounted.Describe();
    }
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
    // Every write fio had issued was answered: fio ends (with errors for
    // the writes the kernel still had queued when the mount went away).
    EXPECT_TRUE(fio.Wait(std::chrono::seconds(30)))
        << "fio still waits for writes after the unmount";
    EXPECT_TRUE(
        WaitUntil([&] { return !PvdiskProcessAlive(mount.daemon_pid()); },
                  std::chrono::seconds(10)))
        << "the daemon still runs after pvdisk unmount returned";

    // Every 100-byte block was written many times over with the same bytes;
    // a lost or torn read-modify-write would show as zeros or other bytes.
    Fd fd = Open(image, O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(std::string(kWrittenBytes, kFioByte),
                              PreadAll(fd.get(), 0, kWrittenBytes)),
              "");
    EXPECT_EQ(
        FirstDifference(std::string(size - kWrittenBytes, '\0'),
                        PreadAll(fd.get(), kWrittenBytes, size - kWrittenBytes),
                        kWrittenBytes),
        "")
        << "bytes outside fio's blocks changed";
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
