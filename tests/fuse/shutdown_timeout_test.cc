// --shutdown-timeout: unmount and SIGTERM wait for I/O in flight only that
// long. What a hung backend has not answered by then fails with EIO, a
// backend process is killed, one line on the daemon's stderr names what was
// abandoned, the daemon exits and the mount is gone.
//
// Two hangs, both real: a backend process stopped with SIGSTOP, and (thread
// backends) an engine that never completes I/O on one sector, the test-only
// fault PVDISK_TEST_FAULT=hang=SECTOR (src/io/test_fault.h), given to
// the daemon only through its environment.
//
// The daemon runs with --foreground under the test, so that its stderr (the
// abandonment line) is the test's to read.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

using std::chrono::steady_clock;

constexpr uint64_t kMiB = 1 << 20;
constexpr int kTimeoutSeconds = 2;
// How long after the timeout the daemon may take to be gone (the contract:
// the timeout plus a few seconds to log, kill backends and exit).
constexpr auto kExitAllowance = std::chrono::seconds(kTimeoutSeconds + 5);
// The 4 KiB block the hung write goes to (sector 8192), away from the data
// written before the hang.
constexpr uint64_t kHungOffset = 4 * kMiB;
constexpr uint64_t kHungSector = kHungOffset / 512;

// SIGKILLs a process at the end of the test if it still runs (a stopped
// backend would otherwise outlive a failed test).
struct KillAtEnd {
  pid_t pid = -1;
  ~KillAtEnd() {
    if (pid > 0 && PvdiskProcessAlive(pid)) kill(pid, SIGKILL);
  }
};

// A `pvdisk mount --foreground` of `image` at `mountpoint` on the suite's
// FUSE channel, with `environment` ("NAME=VALUE", may be empty) added to
// its environment.
std::vector<std::string> ForegroundMount(
    const std::string& environment, const std::string& mountpoint,
    const std::string& image, const std::vector<std::string>& flags) {
  std::vector<std::string> mount = {"mount", mountpoint, "--disk", image,
                                    "--foreground"};
  mount.insert(mount.end(), flags.begin(), flags.end());
  std::vector<std::string> argv = {"env"};
  if (!environment.empty()) argv.push_back(environment);
  argv.push_back(PvdiskBinary());
  for (const std::string& word : WithTestFuseIo(mount)) argv.push_back(word);
  return argv;
}

// Writes `data` at `offset` of the mounted disk with O_DIRECT and fsyncs.
void WriteThroughMount(const std::string& file, uint64_t offset,
                       const std::string& data) {
  Fd fd = Open(file, O_WRONLY | O_DIRECT);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  void* buffer = nullptr;
  ASSERT_EQ(posix_memalign(&buffer, 4096, data.size()), 0);
  std::memcpy(buffer, data.data(), data.size());
  ssize_t written = pwrite(fd.get(), buffer, data.size(), offset);
  int error = errno;
  free(buffer);
  ASSERT_EQ(written, static_cast<ssize_t>(data.size())) << strerror(error);
  ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
}

// A direct 4 KiB write at kHungOffset: the request that will hang.
std::vector<std::string> HungWrite(const std::string& file) {
  return {"dd",           "if=/dev/zero",
          "of=" + file,   "bs=4096",
          "count=1",      "seek=" + std::to_string(kHungSector / 8),
          "oflag=direct", "conv=notrunc"};
}

// What every hang case checks once the daemon was told to stop at
// `stopped_at`: it exits within the bound, the mount is gone, the hung
// write got an error, the line names the abandoned request, and the data
// written before the hang is in the image.
void ExpectAbandonedAndGone(BackgroundProcess& daemon, BackgroundProcess& hung,
                            const std::string& mountpoint,
                            const std::string& image, const std::string& before,
                            steady_clock::time_point stopped_at) {
  ASSERT_TRUE(daemon.Wait(kExitAllowance + std::chrono::seconds(20)))
      << "the daemon still runs long after it was told to stop";
  auto took = steady_clock::now() - stopped_at;
  EXPECT_LT(took, kExitAllowance)
      << "the daemon took "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms with --shutdown-timeout " << kTimeoutSeconds;
  EXPECT_FALSE(IsMounted(mountpoint));
  EXPECT_NE(daemon.result().exit_code, 0) << daemon.result().Describe();
  // One line names what was given up: the one 4 KiB write.
  const std::string& err = daemon.result().err;
  EXPECT_NE(err.find("gave up after --shutdown-timeout 2 s: abandoned 1 "
                     "request(s) of 4096 bytes in flight, failed with EIO"),
            std::string::npos)
      << err;
  // The caller of the hung write got its answer, an error.
  ASSERT_TRUE(hung.Wait(std::chrono::seconds(10)))
      << "the hung write still waits after the daemon exited";
  EXPECT_NE(hung.result().exit_code, 0) << hung.result().Describe();
  EXPECT_NE(hung.result().err.find("Input/output error"), std::string::npos)
      << hung.result().Describe();
  // What was written and synced before the hang is on the image.
  Fd fd = Open(image, O_RDONLY);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  EXPECT_EQ(FirstDifference(before, PreadAll(fd.get(), 0, before.size())), "");
}

// Waits until the hung write is on a ring (the stats' inflight gauge).
bool HungWriteInFlight(const std::string& mountpoint) {
  return WaitUntil(
      [&] { return StatsOf(mountpoint, "disk0.img")["inflight"] > 0; },
      std::chrono::seconds(30));
}

// --backend process: the backend is stopped (SIGSTOP) with a write in
// flight, then the daemon gets SIGTERM.
TEST(ShutdownTimeoutTest, StoppedBackendProcessIsKilledAndAbandoned) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string mountpoint = dir.MakeDir("mnt");
  // Declared first, destroyed last: should the test fail, the daemon is
  // killed first, which answers the hung write (ENOTCONN) so that it can
  // be reaped.
  std::optional<BackgroundProcess> hung;
  BackgroundProcess daemon(
      ForegroundMount("", mountpoint, image,
                      {"--backend", "process", "--shutdown-timeout",
                       std::to_string(kTimeoutSeconds)}));
  ASSERT_TRUE(daemon.started());
  ASSERT_TRUE(WaitUntil([&] { return IsMounted(mountpoint); },
                        std::chrono::seconds(30)))
      << "not mounted";
  const std::string file = mountpoint + "/disk0.img";
  const std::string before = PatternBytes(37, 64 * 1024);
  WriteThroughMount(file, 0, before);
  KillAtEnd backend{static_cast<pid_t>(
      std::stol(StatsOf(mountpoint, "disk0.img").config["backend_pid"]))};
  ASSERT_GT(backend.pid, 0);
  ASSERT_EQ(kill(backend.pid, SIGSTOP), 0) << std::strerror(errno);
  hung.emplace(HungWrite(file));
  ASSERT_TRUE(HungWriteInFlight(mountpoint)) << "the write never got going";

  auto stopped_at = steady_clock::now();
  ASSERT_EQ(kill(daemon.pid(), SIGTERM), 0) << std::strerror(errno);
  ExpectAbandonedAndGone(daemon, *hung, mountpoint, image, before, stopped_at);
  EXPECT_NE(daemon.result().err.find("killed its backend process (pid " +
                                     std::to_string(backend.pid) + ")"),
            std::string::npos)
      << daemon.result().err;
  // The stopped backend is gone (killed and reaped by the daemon).
  EXPECT_FALSE(PvdiskProcessAlive(backend.pid));
  EXPECT_TRUE(PvdiskProcessesMentioning(dir.path()).empty());
}

// Thread backends (the suite's default placement, and backend threads): the
// engine never completes the write; `pvdisk unmount` returns in time.
class HungEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HungEngineTest, UnmountAbandonsWhatTheEngineNeverCompletes) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string mountpoint = dir.MakeDir("mnt");
  std::vector<std::string> flags = {"--shutdown-timeout",
                                    std::to_string(kTimeoutSeconds)};
  if (!GetParam().empty()) {
    flags.insert(flags.end(), {"--placement", GetParam()});
  }
  // Declared first, destroyed last: should the test fail, the daemon is
  // killed first, which answers the hung write (ENOTCONN) so that it can
  // be reaped.
  std::optional<BackgroundProcess> hung;
  BackgroundProcess daemon(
      ForegroundMount("PVDISK_TEST_FAULT=hang=" + std::to_string(kHungSector),
                      mountpoint, image, flags));
  ASSERT_TRUE(daemon.started());
  ASSERT_TRUE(WaitUntil([&] { return IsMounted(mountpoint); },
                        std::chrono::seconds(30)))
      << "not mounted: "
      << (daemon.Wait(std::chrono::seconds(1)) ? daemon.result().Describe()
                                               : std::string());
  EXPECT_NE(StatsOf(mountpoint, "disk0.img")
                .config["engine_mode"]
                .find("never completes (test fault)"),
            std::string::npos);
  const std::string file = mountpoint + "/disk0.img";
  const std::string before = PatternBytes(41, 64 * 1024);
  WriteThroughMount(file, 0, before);
  hung.emplace(HungWrite(file));
  ASSERT_TRUE(HungWriteInFlight(mountpoint)) << "the write never got going";

  auto stopped_at = steady_clock::now();
  CommandResult unmounted =
      RunPvdisk({"unmount", mountpoint}, std::chrono::seconds(60));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_LT(steady_clock::now() - stopped_at, kExitAllowance);
  ExpectAbandonedAndGone(daemon, *hung, mountpoint, image, before, stopped_at);
}

// "": the suite's default placement (inline on uring, backend threads on
// classic).
INSTANTIATE_TEST_SUITE_P(Placements, HungEngineTest,
                         ::testing::Values("", "backend-thread"),
                         [](const auto& info) {
                           return info.param.empty()
                                      ? std::string("DefaultPlacement")
                                      : std::string("BackendThread");
                         });

// Without a hang, shutdown abandons nothing: every write fio issued before
// the unmount is answered and its data is on the image, and no line says
// anything was given up.
TEST(ShutdownTimeoutTest, UnmountUnderLoadAbandonsNothing) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string mountpoint = dir.MakeDir("mnt");
  BackgroundProcess daemon(
      ForegroundMount("", mountpoint, image,
                      {"--shutdown-timeout", std::to_string(kTimeoutSeconds)}));
  ASSERT_TRUE(daemon.started());
  ASSERT_TRUE(WaitUntil([&] { return IsMounted(mountpoint); },
                        std::chrono::seconds(30)))
      << "not mounted";
  // Verified writes at depth 64 over 16 MiB; fio checks each block's
  // checksum after writing it, so a lost or torn write fails fio.
  const std::string file = mountpoint + "/disk0.img";
  CommandResult fio = RunCommand(FioCommand(
      file, {"--rw=randwrite", "--bs=4k", "--size=16M", "--iodepth=64",
             "--verify=crc32c", "--allow_file_create=0"}));
  ExpectFioClean(fio);
  BackgroundProcess load(
      FioCommand(file, {"--rw=randwrite", "--bs=4k", "--size=16M",
                        "--iodepth=64", "--offset=32M", "--time_based",
                        "--runtime=30", "--allow_file_create=0"}));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return StatsOf(mountpoint, "disk0.img")["inflight"] > 0 &&
               StatsOf(mountpoint, "disk0.img")["fuse_writes"] > 1000;
      },
      std::chrono::seconds(30)))
      << "the load never got going";
  CommandResult unmounted =
      RunPvdisk({"unmount", mountpoint}, std::chrono::seconds(60));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  ASSERT_TRUE(daemon.Wait(std::chrono::seconds(30)));
  EXPECT_EQ(daemon.result().exit_code, 0) << daemon.result().Describe();
  EXPECT_EQ(daemon.result().err.find("abandoned"), std::string::npos)
      << daemon.result().err;
  EXPECT_TRUE(load.Wait(std::chrono::seconds(30)));
  EXPECT_FALSE(IsMounted(mountpoint));
  // The verified region is intact after the unmount: mount again, read it
  // back with fio's verify-only pass.
  BackgroundProcess again(ForegroundMount("", mountpoint, image, {}));
  ASSERT_TRUE(WaitUntil([&] { return IsMounted(mountpoint); },
                        std::chrono::seconds(30)));
  CommandResult verify = RunCommand(FioCommand(
      file, {"--rw=randwrite", "--bs=4k", "--size=16M", "--verify=crc32c",
             "--verify_only", "--allow_file_create=0"}));
  ExpectFioClean(verify);
  EXPECT_EQ(RunPvdisk({"unmount", mountpoint}).exit_code, 0);
  EXPECT_TRUE(again.Wait(std::chrono::seconds(30)));
}

TEST(ShutdownTimeoutTest, HelpStatesTheDefault) {
  EXPECT_EQ(MountFlagDefault("shutdown-timeout"), "30");
}

TEST(ShutdownTimeoutTest, BadValuesAreRefusedNamingTheRange) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 4 * kMiB);
  const std::string mountpoint = dir.MakeDir("mnt");
  for (const char* bad : {"0", "86401", "-1", "2s", "1.5"}) {
    SCOPED_TRACE(std::string("--shutdown-timeout '") + bad + "'");
    CommandResult result = RunPvdisk(
        {"mount", mountpoint, "--disk", image, "--shutdown-timeout", bad});
    ExpectUsageError(result);
    EXPECT_NE(result.err.find("--shutdown-timeout '" + std::string(bad) +
                              "' is not allowed: use a whole number from 1 "
                              "to 86400"),
              std::string::npos)
        << result.Describe();
    EXPECT_FALSE(IsMounted(mountpoint));
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
