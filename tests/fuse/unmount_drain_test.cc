// Unmount while overlapping unaligned writes are queued behind one another
// on different queues (issue 10, defect 1): every run must unmount in
// bounded time, answer every write fio issued (done or failed), and leave
// an image that holds exactly what fio wrote.
#include <fcntl.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

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
constexpr int kRuns = 5;

// The issue's two reproductions.
struct DrainCase {
  const char* name;
  std::vector<std::string> mount_flags;
  uint64_t offset;  // where fio's 4 KiB start
};
const DrainCase kCases[] = {
    // Every request to the next queue: a write and the one waiting behind
    // it land on different queues. Hung in 2 of 3 runs on main (the issue);
    // this test on main hung in run 2 of 5, and in run 1 on a second try.
    // Five runs at 2 in 3 miss it about once in 250.
    {"RoundRobin", {"--queues", "2", "--queue-map", "round-robin"}, 0},
    // Default flags (1 MiB stripes per queue), 4 KiB straddling a stripe
    // boundary. Hung in 1 of 4 runs on main (the issue); this test on main
    // hung in run 1.
    {"StraddlingAStripe", {}, kMiB - 2 * 1024},
};

void PrintTo(const DrainCase& drain_case, std::ostream* out) {
  *out << drain_case.name;
}

class UnmountDrainTest : public ::testing::TestWithParam<DrainCase> {};

TEST_P(UnmountDrainTest,
       UnmountFinishesWithUnalignedWritesQueuedBehindEachOther) {
  PVDISK_REQUIRE_FIO();
  const DrainCase& drain_case = GetParam();
  const uint64_t start = drain_case.offset;
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
         "--offset=" + std::to_string(start), "--size=4k",
         "--bs=" + std::to_string(kBlockSize), "--rw=randwrite",
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
    const std::string contents = PreadAll(fd.get(), 0, size);
    std::string expected(size, '\0');
    expected.replace(start, kWrittenBytes, kWrittenBytes, kFioByte);
    EXPECT_EQ(FirstDifference(expected, contents), "");
  }
}

INSTANTIATE_TEST_SUITE_P(IssueReproductions, UnmountDrainTest,
                         ::testing::ValuesIn(kCases), [](const auto& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
