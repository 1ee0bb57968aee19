// Harness for the integration tests on a real FUSE mount: a scratch
// directory, running commands with captured output, a RAII mount made with
// the real `pvdisk` binary, reading the stats files, and small file helpers.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "stats/json_reader.h"

namespace pvdisk::fuse_testing {

using stats::JsonValue;
using stats::ParseJson;

// The pvdisk binary under test.
const char* PvdiskBinary();

// Empty if the suite can run here, else why not (for GTEST_SKIP).
std::string FuseUnavailableReason();
std::string FioUnavailableReason();

#define PVDISK_REQUIRE_FUSE()                                              \
  do {                                                                     \
    if (std::string why = ::pvdisk::fuse_testing::FuseUnavailableReason(); \
        !why.empty()) {                                                    \
      GTEST_SKIP() << why;                                                 \
    }                                                                      \
  } while (0)

#define PVDISK_REQUIRE_FIO()                                              \
  do {                                                                    \
    PVDISK_REQUIRE_FUSE();                                                \
    if (std::string why = ::pvdisk::fuse_testing::FioUnavailableReason(); \
        !why.empty()) {                                                   \
      GTEST_SKIP() << why;                                                \
    }                                                                     \
  } while (0)

// fio, and FUSE over io_uring in this kernel (its enable_uring parameter):
// what tests of the uring channel's own features need.
#define PVDISK_REQUIRE_FUSE_URING()                                      \
  do {                                                                   \
    PVDISK_REQUIRE_FIO();                                                \
    if (access("/sys/module/fuse/parameters/enable_uring", F_OK) != 0) { \
      GTEST_SKIP() << "this kernel has no FUSE over io_uring (no "       \
                      "enable_uring parameter), which this test needs";  \
    }                                                                    \
  } while (0)

// A fresh directory /tmp/pvdisk_fuse_test.XXXXXX (mkdtemp). The destructor
// detaches anything still mounted below it, kills pvdisk daemons that serve
// from it, and removes it with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }
  // Creates directory `name` inside and returns its path.
  std::string MakeDir(const std::string& name) const;

 private:
  std::string path_;
};

// Every TempDir this process made (for the leak checks).
std::vector<std::string> AllTempDirs();

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal or not run
  bool timed_out = false;
  std::string out;               // stdout
  std::string err;               // stderr
  std::string Describe() const;  // for failure messages
};

// Runs argv[0] (searched in PATH) with `argv`, captures stdout and stderr,
// and kills it (its process group) if it runs longer than `timeout`.
CommandResult RunCommand(
    const std::vector<std::string>& argv,
    std::chrono::milliseconds timeout = std::chrono::seconds(120));
// Fails the test unless `result` is a refusal of bad input: exit status 2
// and exactly one line on stderr starting "pvdisk: ", nothing on stdout.
void ExpectUsageError(const CommandResult& result);

// The FUSE channel this run of the suite covers: PVDISK_TEST_FUSE_IO
// ("classic" or "uring"; ctest runs the suite once with each), or "" for
// pvdisk's default.
const std::string& TestFuseIo();
// The placement this run of the suite covers: PVDISK_TEST_PLACEMENT
// ("backend-thread" for ctest's run of the uring channel with backend
// threads), or "" for pvdisk's default.
const std::string& TestPlacement();
// `args` of a `pvdisk mount` with `--fuse-io TestFuseIo()` added, unless
// they choose a channel (or its settings) themselves or ask for --help, and
// `--placement TestPlacement()` unless they choose one. Other commands are
// returned unchanged.
std::vector<std::string> WithTestFuseIo(std::vector<std::string> args);

// Runs `pvdisk args...` (a mount on the suite's channel, see
// WithTestFuseIo).
CommandResult RunPvdisk(
    const std::vector<std::string>& args,
    std::chrono::milliseconds timeout = std::chrono::seconds(120));

// A child process running in the background, output captured. The
// destructor kills it if it still runs.
class BackgroundProcess {
 public:
  explicit BackgroundProcess(const std::vector<std::string>& argv);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  // for signals; -1 if not started
  // Waits up to `timeout` for the process to exit; true if it did. Then
  // result() holds its exit code and output.
  bool Wait(std::chrono::milliseconds timeout);
  const CommandResult& result() const { return result_; }

 private:
  void Collect(int status);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool done_ = false;
  CommandResult result_;
};

// True if `path` (absolute) is a mount point in /proc/self/mountinfo.
bool IsMounted(const std::string& path);
// How many mounts are stacked at `path` (absolute).
int MountCount(const std::string& path);
// The pvdisk daemon serving `mountpoint`, from the mount's source
// "pvdisk-PID", or nullopt.
std::optional<pid_t> DaemonPidOf(const std::string& mountpoint);
// True while `pid` runs as a pvdisk process (not a zombie).
bool PvdiskProcessAlive(pid_t pid);
// Pids of live pvdisk processes whose command line mentions `needle`.
std::vector<pid_t> PvdiskProcessesMentioning(const std::string& needle);

// Test-only faults (src/io/test_fault.h: hang=SECTOR, fail=N, fanout) reach
// pvdisk only through the PVDISK_TEST_FAULT environment variable, never
// through its flags. While a ScopedTestFault lives, the variable is
// `faults` in this process's environment, which every command the harness
// runs inherits: `pvdisk mount`, so its daemon and the daemon's backend
// processes. Make it
// before the Mount it is for (and destroy it after), while no other thread
// of the test reads the environment.
class ScopedTestFault {
 public:
  explicit ScopedTestFault(const std::string& faults);
  ~ScopedTestFault();
  ScopedTestFault(const ScopedTestFault&) = delete;
  ScopedTestFault& operator=(const ScopedTestFault&) = delete;
};

// A mount made with `pvdisk mount MOUNTPOINT args...`. On destruction it
// runs `pvdisk unmount`, detaches the mount with `fusermount3 -u -z` if it is
// still there, and kills the daemon if it still runs. Close every file of
// the mount before it goes away.
//
// A watcher thread reaps the daemon when it exits (the daemon is this
// process's child: the test process is a child subreaper). It also fails the
// test and SIGKILLs the daemon if the mount lives longer than `watchdog`: a
// request the daemon never answers would otherwise block the test in a
// system call forever; killing the daemon aborts the FUSE connection, so the
// call returns ENOTCONN and the test goes on.
class Mount {
 public:
  static constexpr std::chrono::seconds kDefaultWatchdog{90};

  Mount(std::string mountpoint, const std::vector<std::string>& args,
        std::chrono::seconds watchdog = kDefaultWatchdog);
  ~Mount();
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;

  // True if `pvdisk mount` exited 0 and the mount is there.
  bool ok() const { return ok_; }
  const CommandResult& mount_result() const { return mount_result_; }
  const std::string& mountpoint() const { return mountpoint_; }
  std::string Path(const std::string& name) const {
    return mountpoint_ + "/" + name;
  }
  pid_t daemon_pid() const { return daemon_pid_; }

  // Runs `pvdisk unmount MOUNTPOINT`; afterwards the destructor only checks.
  CommandResult Unmount(
      std::chrono::milliseconds timeout = std::chrono::seconds(60));

 private:
  void CleanUp();
  void Watch(std::chrono::seconds limit);

  std::string mountpoint_;
  CommandResult mount_result_;
  bool ok_ = false;
  pid_t daemon_pid_ = -1;

  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
  std::thread watchdog_;
};

// An open file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Close();  // returns close()'s result (0 if nothing was open)

 private:
  int fd_ = -1;
};

// open(2) wrapped in an Fd; check valid() and errno.
Fd Open(const std::string& path, int flags, mode_t mode = 0644);

// Whole-file and range helpers (they fail the current test on error).
std::string ReadWholeFile(const std::string& path);  // until read() gives 0
void WriteWholeFile(const std::string& path, std::string_view data);
// Writes `size` bytes of `fill` to `path` (created or truncated), in chunks.
void FillFile(const std::string& path, uint64_t size, uint8_t fill);
// Reads exactly `length` bytes at `offset` with pread, in `chunk`-byte
// pieces; fails the test on an error or a short read.
std::string PreadAll(int fd, uint64_t offset, uint64_t length,
                     uint64_t chunk = 1 << 20);
void PwriteAll(int fd, uint64_t offset, std::string_view data);

// Deterministic pseudo-random bytes.
std::string PatternBytes(uint64_t seed, size_t length);

// Returns "" if equal, else where `actual` first differs from `expected`
// (offsets shifted by `base` for the message).
std::string FirstDifference(std::string_view expected, std::string_view actual,
                            uint64_t base = 0);

// 4 KiB blocks of `data` that are all `old_byte`, all `new_byte`, or
// neither (torn: a write that reached the image only in part), with where
// the first torn block differs from an old one.
struct BlockCensus {
  uint64_t old_blocks = 0;
  uint64_t new_blocks = 0;
  uint64_t torn = 0;
  std::string first_torn;
};
BlockCensus CountBlocks(std::string_view data, char old_byte, char new_byte);

// One disk of stats.json: the counters of each queue and of the total.
struct DiskStats {
  std::string name;
  std::map<std::string, std::string> config;  // values as text
  std::vector<std::map<std::string, uint64_t>> queues;
  std::map<std::string, uint64_t> total;
  // A total counter; fails the test if it is missing.
  uint64_t operator[](const std::string& counter) const;
};
// Reads and parses MOUNTPOINT/stats.json; fails the test on bad contents.
std::vector<DiskStats> ReadStats(const std::string& mountpoint);
// The stats of the disk named `name` (fails the test if it is absent).
DiskStats StatsOf(const std::string& mountpoint, const std::string& name);

// Creates a sparse raw image of `size_bytes` at `path`: io::CreateImage,
// the function `pvdisk create PATH --size BYTES` runs, called here rather
// than through a pvdisk process (a start-up of its 60 shared libraries per
// image, paid in most tests). The command itself is tested as a command:
// BadInputTest's Create cases, CliTest.CreateRefusesAnExistingFileUnlessForced
// and tests/cli/create_command_test.cc.
void CreateImage(const std::string& path, uint64_t size_bytes);

// fio job arguments shared by the tests: --name, --filename and the
// io_uring/direct settings; `extra` follows.
std::vector<std::string> FioCommand(const std::string& file,
                                    const std::vector<std::string>& extra);

// Fails the test unless fio exited 0 and reported no error and no verify
// failure (its normal output has "err= 0" for a job that saw no error).
void ExpectFioClean(const CommandResult& fio);

// The ring protocols (`--frontend`) every data-path test runs with; the
// CliTest HelpListsTheFrontendsTheSuiteCovers keeps this list in step with
// `pvdisk mount --help`.
const std::vector<std::string>& AllFrontends();
// Every `--frontend` pvdisk offers: AllFrontends() and nvme, which runs in
// one representative combination of each parametrized test that covers a
// protocol's path (fio verify, unaligned I/O, the end of the disk, discard,
// flush, EIO, the null engine, unmount during I/O, backend kills, SIGKILL
// and power-cut durability, a deep ring, the smallest --max-segments,
// plain doorbells: each test's "Nvme" instantiation) to keep the suite's
// time. Not for nvme: the timing tests (DelayTest, PollTest, MergeFioTest)
// and the options that sit above the ring (queue counts and maps, backend
// threads, interrupt threads, write order).
const std::vector<std::string>& OfferedFrontends();
// `frontend` as part of a test name ("virtio-packed" -> "virtio_packed":
// gtest names allow only letters, digits and '_').
std::string FrontendTestName(const std::string& frontend);

// The parameter of the data-path tests: (frontend, engine).
using FrontendEngine = std::tuple<std::string, std::string>;
// "blkif_uring" etc.
std::string FrontendEngineName(
    const ::testing::TestParamInfo<FrontendEngine>& info);
// Every frontend with each of `engines`.
::testing::internal::ParamGenerator<FrontendEngine> FrontendsTimesEngines(
    const std::vector<std::string>& engines);

// The default of `pvdisk mount --FLAG` as `pvdisk mount --help` states it
// ("(default: X)"); fails the test and returns "" if the help has none.
std::string MountFlagDefault(const std::string& flag);
// MountFlagDefault("queues") as a number.
// The queues a disk mounted without queue flags has: the --help default, or
// one per possible CPU when `stats` show the inline placement (which the
// uring channel gets by default).
size_t DefaultQueueCount(const DiskStats& stats);
// The number of possible CPUs: the uring channel's queue count.
size_t PossibleCpuCount();
// The placement a mount without placement or queue flags gets on the FUSE
// channel `stats` show: inline on uring, backend-thread on classic (or the
// suite's TestPlacement()).
std::string DefaultPlacement(const DiskStats& stats);

// A config value of stats.json as a number (fails the test if it is
// missing or not a number).
uint64_t ConfigNumber(const DiskStats& stats, const std::string& key);

// Checks that the total of every counter agrees with the queues' rows the
// way src/stats/counters.h says: the sum for counts and gauges, the highest
// value for maxima; and that every queue has every counter.
void ExpectTotalsAgreeWithQueues(const DiskStats& stats);

// Writes "reset" to MOUNTPOINT/stats (fails the test on an error).
void ResetStats(const std::string& mountpoint);

// Polls `condition` every 10 ms for up to `timeout`; true once it holds.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout);

}  // namespace pvdisk::fuse_testing
