// Faults of the transport and its engine through a real mount, with fio:
// an I/O engine that fails as a whole and plugging with inline interrupts
// must reach fio as errors or finish, never hang; afterwards the disk serves
// correct data and unmount finishes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// PVDISK_TEST_FAULT=fail=N (test only, io/test_fault.h): the engine fails
// as a whole at the process's N-th submission. With `flags` (which place
// the backend where engines own their loop), fio must see errors and end;
// then the disk serves verified writes and reads, and unmount finishes.
void ExpectEngineFailureSeenThenServed(const std::vector<std::string>& flags) {
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string data = PatternBytes(55, 1 * kMiB + 1000);
  constexpr uint64_t kAt = 40 * kMiB + 17;
  {
    ScopedTestFault fault("fail=300");
    std::vector<std::string> args = {"--disk", image};
    args.insert(args.end(), flags.begin(), flags.end());
    Mount mount(dir.MakeDir("mnt"), args);
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    // Writes at depth, so that the engine holds requests when it fails.
    CommandResult failing =
        RunCommand(FioCommand(mount.Path("disk0.img"),
                              {"--rw=randwrite", "--bs=4k", "--iodepth=32",
                               "--size=32M", "--numjobs=2"}),
                   std::chrono::seconds(60));
    ASSERT_FALSE(failing.timed_out) << "fio hung: " << failing.Describe();
    EXPECT_NE(failing.exit_code, 0) << failing.Describe();
    const bool saw_eio =
        failing.out.find("Input/output error") != std::string::npos ||
        failing.err.find("Input/output error") != std::string::npos;
    EXPECT_TRUE(saw_eio) << "fio reported no EIO: " << failing.Describe();
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats["engine_restarts"], 1u);
    EXPECT_GT(stats["errors"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);

    // The disk serves again: fio's verified writes, and our own bytes
    // through the mount.
    CommandResult verified = RunCommand(
        FioCommand(mount.Path("disk0.img"),
                   {"--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=16M",
                    "--verify=crc32c", "--do_verify=1"}),
        std::chrono::seconds(120));
    ExpectFioClean(verified);
    {
      Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), kAt, data);
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
      EXPECT_EQ(
          FirstDifference(data, PreadAll(fd.get(), kAt, data.size()), kAt), "");
      ASSERT_EQ(fd.Close(), 0);
    }
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["engine_restarts"], 1u);
    const auto started = std::chrono::steady_clock::now();
    CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
    EXPECT_LT(std::chrono::steady_clock::now() - started,
              std::chrono::seconds(30));
  }
  // And in the image, read without the mount.
  Fd raw = Open(image, O_RDONLY);
  ASSERT_TRUE(raw.valid());
  EXPECT_EQ(FirstDifference(data, PreadAll(raw.get(), kAt, data.size()), kAt),
            "");
}

class EngineFailureTest : public ::testing::TestWithParam<FrontendEngine> {};

TEST_P(EngineFailureTest, FioSeesErrorsThenTheDiskServesAgain) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, engine] = GetParam();
  ExpectEngineFailureSeenThenServed({"--frontend", frontend, "--engine", engine,
                                     "--placement", "backend-thread"});
}

// The fault reaches a backend process through the environment it inherits
// from the daemon; the restart is the engine's, not the process's.
TEST(EngineFailureInBackendProcessTest, FioSeesErrorsThenTheDiskServesAgain) {
  PVDISK_REQUIRE_FIO();
  ExpectEngineFailureSeenThenServed(
      {"--backend", "process", "--placement", "backend-thread"});
}

// Under the inline placement the engines are on lent rings, which never fail
// as a whole: fail= leaves them alone, and the disk serves as without it.
TEST(EngineFailureInlineTest, EnginesOnLentRingsAreLeftAlone) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  ScopedTestFault fault("fail=3");
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image, "--fuse-io", "uring", "--placement", "inline"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult verified =
      RunCommand(FioCommand(mount.Path("disk0.img"),
                            {"--rw=randwrite", "--bs=4k", "--iodepth=16",
                             "--size=16M", "--verify=crc32c", "--do_verify=1"}),
                 std::chrono::seconds(120));
  ExpectFioClean(verified);
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["placement"], "inline");
  EXPECT_EQ(stats["engine_restarts"], 0u);
  EXPECT_EQ(stats["errors"], 0u);
  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
}

INSTANTIATE_TEST_SUITE_P(FrontendsAndEngines, EngineFailureTest,
                         FrontendsTimesEngines({"uring", "sync"}),
                         FrontendEngineName);
// nvme: the requests the failed engine held are answered with an error
// status, and the new engine serves the queue pair.
INSTANTIATE_TEST_SUITE_P(Nvme, EngineFailureTest,
                         ::testing::Values(FrontendEngine("nvme", "uring")),
                         FrontendEngineName);

// --plug-us with the default --irq inline: a fio job that fills a 32-entry
// ring (iodepth 64, a 2 ms plug) must not strand staged requests once
// nothing is in flight (a plug deadline must wake someone). It must finish
// cleanly in both interrupt modes, and unmount must finish.
class PlugTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlugTest, FioAtDepthOnASmallRingFinishes) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 256 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image, "--ring-size", "32", "--queues", "1",
               "--plug-us", "2000", "--irq", GetParam()});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult fio = RunCommand(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randread", "--bs=4k", "--size=256M", "--iodepth=64",
                  "--ioengine=libaio", "--runtime=3", "--time_based"}),
      std::chrono::seconds(40));
  ASSERT_FALSE(fio.timed_out) << "fio hung: " << fio.Describe();
  ExpectFioClean(fio);
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_GT(stats["plugs"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
}

INSTANTIATE_TEST_SUITE_P(IrqModes, PlugTest,
                         ::testing::Values("inline", "thread"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
