// --backend process: each disk's backend in a process of its own, restarted
// with nothing lost when it dies, failing with EIO past the restart limit, and
// seeing nothing of the daemon but the shared regions. Everything runs on a
// real mount with the real pvdisk binary; the backend is killed with real
// SIGKILLs.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend_process_util.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string ReadSmallFileForTest(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> FileLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// fio writing random `bs` blocks at `depth` for up to a minute (the test
// stops it earlier); it never creates a file where the mount should be.
std::vector<std::string> EndlessWrites(const std::string& file,
                                       const std::string& bs,
                                       const std::string& depth) {
  return FioCommand(
      file, {"--rw=randwrite", "--bs=" + bs, "--size=16M", "--iodepth=" + depth,
             "--time_based", "--runtime=60", "--allow_file_create=0"});
}

// Waits until writes reach disk0.img (fio may take a while to start on a
// loaded machine).
bool WritesArrived(const std::string& mountpoint) {
  return WaitUntil(
      [&] { return StatsOf(mountpoint, "disk0.img")["fuse_writes"] > 0; },
      std::chrono::seconds(30));
}

// (frontend, persistent)
using KillCase = std::tuple<std::string, std::string>;

class BackendKillTest : public ::testing::TestWithParam<KillCase> {};

// fio writes random blocks and then reads every one back checking its
// crc32c, while the backend process is killed three times at random
// moments: fio sees no error, every block verifies, and the disk counts
// three restarts.
TEST_P(BackendKillTest, FioVerifiesThroughThreeBackendKills) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, persistent] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image, "--backend", "process", "--frontend", frontend,
               "--persistent", persistent},
              std::chrono::seconds(150));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DiskStats before = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(before.config["backend"], "process");
  EXPECT_EQ(before.config["placement"], "backend-process");
  EXPECT_EQ(before.config["persistent"], persistent);
  EXPECT_EQ(before.config["irq"], "thread");

  // 4096 writes of 4 KiB at 1500 per second, then as many verifying reads:
  // about 5.5 s of I/O with requests in flight all along (the rate only
  // sets the average; fio still keeps up to 16 in flight).
  BackgroundProcess fio(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randwrite", "--bs=4k", "--size=16M", "--iodepth=16",
                  "--rate_iops=1500", "--verify=crc32c", "--do_verify=1"}));
  ASSERT_TRUE(fio.started());

  // Three kill moments spread over the run, at least 300 ms apart.
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> jitter_ms(0, 900);
  int killed = 0;
  for (int k = 0; k < 3; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300) +
                                std::chrono::milliseconds(jitter_ms(random)));
    if (!KillBackendAndWaitForNew(mount.mountpoint(), "disk0.img")) break;
    ++killed;
  }
  ASSERT_TRUE(fio.Wait(std::chrono::seconds(120))) << "fio did not finish";
  ExpectFioClean(fio.result());
  EXPECT_EQ(killed, 3);

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["backend_restarts"], 3u);
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_EQ(stats.config["backend_state"], "running");
  // The rings' counters are shared with the backend process: it counted
  // every write and read (fio's 16 MiB and its verification).
  EXPECT_GE(stats["sectors_written"], 16 * kMiB / 512);
  EXPECT_GE(stats["sectors_read"], 16 * kMiB / 512);
  if (persistent == "off") {
    EXPECT_GT(stats["grant_maps"], 0u);
  } else {
    EXPECT_EQ(stats["grant_maps"], 0u);
  }
  pid_t last = BackendPid(mount.mountpoint(), "disk0.img");
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_TRUE(
      WaitUntil([&] { return ProcessGone(last); }, std::chrono::seconds(10)))
      << "backend " << last << " outlived the unmount";
}

std::string KillCaseName(const ::testing::TestParamInfo<KillCase>& info) {
  return FrontendTestName(std::get<0>(info.param)) + "_persistent_" +
         std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(FrontendsAndGrants, BackendKillTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values("on", "off")),
                         KillCaseName);
INSTANTIATE_TEST_SUITE_P(Nvme, BackendKillTest,
                         ::testing::Values(KillCase("nvme", "off")),
                         KillCaseName);

// Past --backend-restart-limit the disk fails: I/O in flight and new I/O
// get EIO (no hang), the stats header says so, and the daemon still
// unmounts cleanly.
TEST(BackendProcessTest, RestartLimitFailsIoWithEioAndUnmountsCleanly) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--backend", "process",
                                   "--backend-restart-limit", "1"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  EXPECT_EQ(
      StatsOf(mount.mountpoint(), "disk0.img").config["backend_restart_limit"],
      "1");
  const std::string data = PatternBytes(13, 64 * 1024);
  {
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 0, data);
  }
  // One death within the minute is allowed: the data is still there.
  ASSERT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), "disk0.img"));
  {
    Fd fd = Open(mount.Path("disk0.img"), O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), 0, data.size())), "");
  }

  // The second death is one too many, with fio's writes in flight.
  BackgroundProcess fio(EndlessWrites(mount.Path("disk0.img"), "4k", "16"));
  ASSERT_TRUE(fio.started());
  ASSERT_TRUE(WritesArrived(mount.mountpoint()));
  pid_t second = BackendPid(mount.mountpoint(), "disk0.img");
  ASSERT_GT(second, 0);
  ASSERT_EQ(kill(second, SIGKILL), 0);
  EXPECT_TRUE(WaitUntil(
      [&] { return BackendState(mount.mountpoint(), "disk0.img") == "failed"; },
      kBackendRestartTimeout));
  ASSERT_TRUE(fio.Wait(std::chrono::seconds(30)))
      << "fio hung on a failed disk";
  EXPECT_NE(fio.result().exit_code, 0) << fio.result().Describe();
  const bool fio_saw_eio =
      fio.result().out.find("Input/output error") != std::string::npos ||
      fio.result().err.find("Input/output error") != std::string::npos;
  EXPECT_TRUE(fio_saw_eio) << fio.result().Describe();

  // New I/O fails at once.
  {
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR | O_DIRECT);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    void* buffer = nullptr;
    ASSERT_EQ(posix_memalign(&buffer, 4096, 4096), 0);
    errno = 0;
    EXPECT_EQ(pread(fd.get(), buffer, 4096, 8192), -1);
    EXPECT_EQ(errno, EIO);
    errno = 0;
    EXPECT_EQ(pwrite(fd.get(), buffer, 4096, 8192), -1);
    EXPECT_EQ(errno, EIO);
    free(buffer);
  }
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["backend_state"], "failed");
  EXPECT_EQ(stats.config["backend_pid"], "-1");
  EXPECT_EQ(stats["backend_restarts"], 1u);
  EXPECT_EQ(stats["inflight"], 0u);

  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_FALSE(IsMounted(mount.mountpoint()));
  EXPECT_TRUE(PvdiskProcessesMentioning(dir.path()).empty());
}

// The backend process maps the rings and data pages (memfds) and nothing of
// the daemon: none of its mappings is the daemon's heap, every shared
// mapping is one of pvdisk's memfds, it holds no /dev/fuse and nothing under
// the mountpoint, and its threads are named.
TEST(BackendProcessTest, BackendMapsOnlyTheSharedRegions) {
  PVDISK_REQUIRE_FUSE();
  for (const char* persistent : {"on", "off"}) {
    SCOPED_TRACE(std::string("--persistent ") + persistent);
    TempDir dir;
    const std::string image = dir.Path("disk0.img");
    CreateImage(image, 16 * kMiB);
    Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--backend", "process",
                                     "--persistent", persistent});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    // Some I/O first, so that per-request grants have come and gone.
    {
      Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), 0, PatternBytes(5, 256 * 1024));
      PreadAll(fd.get(), 0, 256 * 1024);
    }
    pid_t backend = BackendPid(mount.mountpoint(), "disk0.img");
    ASSERT_GT(backend, 0);
    const std::string proc = "/proc/" + std::to_string(backend);
    const std::string daemon_proc =
        "/proc/" + std::to_string(mount.daemon_pid());

    std::string daemon_heap;
    for (const std::string& line : FileLines(daemon_proc + "/maps")) {
      if (line.find("[heap]") != std::string::npos) {
        daemon_heap = line.substr(0, line.find(' '));
      }
    }
    ASSERT_FALSE(daemon_heap.empty()) << "the daemon has no [heap] mapping";
    const uint64_t ring_bytes =
        ConfigNumber(StatsOf(mount.mountpoint(), "disk0.img"), "ring_pages") *
        4096;
    int memfd_mappings = 0;
    for (const std::string& line : FileLines(proc + "/maps")) {
      std::istringstream fields(line);
      std::string range, perms, offset, device, inode, path;
      fields >> range >> perms >> offset >> device >> inode;
      std::getline(fields >> std::ws, path);
      EXPECT_NE(range, daemon_heap) << "the backend maps the daemon's heap";
      if (perms.size() != 4 || perms[3] != 's') continue;
      // The engine's own io_uring rings are the backend's.
      if (path == "anon_inode:[io_uring]") continue;
      EXPECT_EQ(path.rfind("/memfd:pvdisk-", 0), 0u)
          << "a shared mapping that is not a pvdisk region: " << line;
      ++memfd_mappings;
      // Without persistent grants only the ring stays mapped; data pages
      // are mapped while a request is served.
      if (std::string(persistent) == "off" &&
          path.find("-stats") == std::string::npos) {
        uint64_t first =
            std::stoull(range.substr(0, range.find('-')), nullptr, 16);
        uint64_t end =
            std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
        EXPECT_EQ(end - first, ring_bytes) << line;
      }
    }
    // The ring region (and with persistent grants the data pages in it) and
    // the counters of each queue.
    EXPECT_GE(memfd_mappings, 2);

    for (const auto& entry :
         std::filesystem::directory_iterator(proc + "/fd")) {
      std::error_code error;
      std::string target =
          std::filesystem::read_symlink(entry.path(), error).string();
      EXPECT_NE(target, "/dev/fuse");
      EXPECT_NE(target.rfind(mount.mountpoint(), 0), 0u)
          << "the backend holds something of the mountpoint: " << target;
    }
    EXPECT_EQ(std::filesystem::read_symlink(proc + "/cwd").string(), "/");

    bool named_backend_thread = false;
    for (const auto& task :
         std::filesystem::directory_iterator(proc + "/task")) {
      std::vector<std::string> comm = FileLines(task.path().string() + "/comm");
      if (!comm.empty() && comm[0] == "pvdisk-backend") {
        named_backend_thread = true;
      }
    }
    EXPECT_TRUE(named_backend_thread);
    CommandResult unmounted = mount.Unmount();
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
    EXPECT_TRUE(WaitUntil([&] { return ProcessGone(backend); },
                          std::chrono::seconds(10)));
  }
}

// A daemon killed with SIGKILL leaves no backend process behind.
TEST(BackendProcessTest, KilledDaemonLeavesNoBackend) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 16 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--backend", "process"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  pid_t backend = BackendPid(mount.mountpoint(), "disk0.img");
  ASSERT_GT(backend, 0);
  ASSERT_EQ(kill(mount.daemon_pid(), SIGKILL), 0);
  EXPECT_TRUE(
      WaitUntil([&] { return ProcessGone(backend); }, std::chrono::seconds(10)))
      << "backend " << backend << " outlived its daemon: state "
      << ReadSmallFileForTest("/proc/" + std::to_string(backend) + "/stat");
}

// The FUSE suite's data path with --backend process: fio verify with mixed
// sizes on each frontend, two queues served by two backend threads of the
// backend process.
class BackendProcessFioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendProcessFioTest, FioVerifies) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image, "--backend", "process", "--frontend",
               GetParam(), "--queues", "2", "--backend-threads", "2"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult fio = RunCommand(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randrw", "--bsrange=4k-256k", "--size=32M",
                  "--iodepth=16", "--verify=crc32c", "--do_verify=1"}),
      std::chrono::seconds(180));
  ExpectFioClean(fio);
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["frontend"], GetParam());
  EXPECT_EQ(stats.config["backend"], "process");
  EXPECT_EQ(stats.config["engine_mode"], "O_DIRECT");
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["backend_restarts"], 0u);
  ASSERT_EQ(stats.queues.size(), 2u);
  for (const auto& queue : stats.queues) {
    EXPECT_GT(queue.at("reqs_write"), 0u) << "a queue the backend never saw";
  }
  ExpectTotalsAgreeWithQueues(stats);
}

INSTANTIATE_TEST_SUITE_P(Frontends, BackendProcessFioTest,
                         ::testing::ValuesIn(AllFrontends()));
INSTANTIATE_TEST_SUITE_P(Nvme, BackendProcessFioTest, ::testing::Values("nvme"),
                         [](const auto& info) { return info.param; });

// Unmount while fio writes: every write fio issued is answered, the
// unmount finishes and no backend process stays.
TEST(BackendProcessTest, UnmountDuringIoStopsTheBackend) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--backend", "process"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  pid_t backend = BackendPid(mount.mountpoint(), "disk0.img");
  BackgroundProcess fio(EndlessWrites(mount.Path("disk0.img"), "64k", "8"));
  ASSERT_TRUE(fio.started());
  ASSERT_TRUE(WritesArrived(mount.mountpoint()));
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_TRUE(fio.Wait(std::chrono::seconds(60))) << "fio hung";
  EXPECT_FALSE(IsMounted(mount.mountpoint()));
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(backend); },
                        std::chrono::seconds(10)));
}

// Bad input: one line naming the flag and what is allowed, exit 2, nothing
// mounted.
TEST(BackendProcessTest, BadBackendFlagsAreRefused) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kMiB);
  const std::string mnt = dir.MakeDir("mnt");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--backend", "sideways"}, "--backend"},
      {{"--backend", "process", "--irq", "inline"}, "--irq"},
      {{"--backend-restart-limit", "3"}, "--backend-restart-limit"},
      {{"--backend", "process", "--backend-restart-limit", "100000"},
       "--backend-restart-limit"},
      {{"--backend", "process", "--backend-restart-limit", "x"},
       "--backend-restart-limit"},
  };
  for (const auto& [flags, names] : cases) {
    std::vector<std::string> args = {"mount", mnt, "--disk", image};
    args.insert(args.end(), flags.begin(), flags.end());
    CommandResult result = RunPvdisk(args, std::chrono::seconds(30));
    SCOPED_TRACE(result.Describe());
    ExpectUsageError(result);
    EXPECT_NE(result.err.find(names), std::string::npos);
    EXPECT_FALSE(IsMounted(mnt));
  }
  EXPECT_TRUE(PvdiskProcessesMentioning(dir.path()).empty());
}

}  // namespace
}  // namespace pvdisk::fuse_testing
