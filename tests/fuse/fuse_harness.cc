#include "fuse_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "io/image_file.h"
#include "stats/counters.h"
#include "tsan_reports.h"

namespace pvdisk::fuse_testing {
namespace {

// The runtime directory of every daemon this test process starts
// (XDG_RUNTIME_DIR, where a mount without --log keeps its log file, see
// cli/log_option.h): a directory of this process's own, removed when it
// exits, so that no test leaves a log file behind. A plain array: the
// atexit handler runs after static strings are destroyed.
char g_runtime_dir[] = "/tmp/pvdisk_test_run.XXXXXX";
[[maybe_unused]] const bool kRuntimeDirSet = [] {
  if (mkdtemp(g_runtime_dir) == nullptr) return false;
  setenv("XDG_RUNTIME_DIR", g_runtime_dir, 1);
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(g_runtime_dir, ignored);
  });
  return true;
}();

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string>& Registry() {
  static std::vector<std::string> dirs;
  return dirs;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' &&
        field[i + 1] <= '7') {
      out += static_cast<char>((field[i + 1] - '0') * 64 +
                               (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += field[i];
  }
  return out;
}

struct MountInfo {
  std::string mount_point;
  std::string fs_type;
  std::string source;
};

std::vector<MountInfo> ReadMountInfo() {
  std::vector<MountInfo> mounts;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string id, parent, dev, root, mount_point, word;
    words >> id >> parent >> dev >> root >> mount_point;
    while (words >> word && word != "-") {
    }
    MountInfo info;
    info.mount_point = Unescape(mount_point);
    words >> info.fs_type >> info.source;
    info.source = Unescape(info.source);
    mounts.push_back(info);
  }
  return mounts;
}

std::vector<std::string> MountsBelow(const std::string& dir) {
  std::vector<std::string> found;
  for (const MountInfo& info : ReadMountInfo()) {
    if (info.mount_point == dir || info.mount_point.rfind(dir + "/", 0) == 0) {
      found.push_back(info.mount_point);
    }
  }
  return found;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The state letter of /proc/PID/stat, or 0 if the process is gone.
char ProcessState(pid_t pid) {
  std::string stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

std::string ProcessComm(pid_t pid) {
  std::string comm = ReadSmallFile("/proc/" + std::to_string(pid) + "/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

std::string ReadFd(int fd) {
  std::string out;
  char buffer[4096];
  off_t offset = 0;
  ssize_t n;
  while ((n = pread(fd, buffer, sizeof(buffer), offset)) > 0) {
    out.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

// Forks and execs `argv` with stdout/stderr into the two memfds, in its own
// process group. Returns the pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execvp(args[0], args.data());
    const char message[] = "exec failed\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  return pid;
}

void FillResult(int status, CommandResult* result) {
  result->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Quote(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    out += arg;
  }
  return out;
}

bool ExecutableInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

const char* PvdiskBinary() { return PVDISK_BINARY; }

std::string FuseUnavailableReason() {
  struct stat st;
  if (stat("/dev/fuse", &st) != 0) {
    return std::string("/dev/fuse is missing: ") + std::strerror(errno);
  }
  return "";
}

std::string FioUnavailableReason() {
  return ExecutableInPath("fio") ? "" : "fio is not installed";
}

// ---------------------------------------------------------------------------
// TempDir

TempDir::TempDir() {
  std::string pattern = "/tmp/pvdisk_fuse_test.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  path_ = pattern;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().push_back(path_);
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  // Everything below should be unmounted and stopped by now (Mount does it);
  // anything left is a leak, reported, then cleaned up so that rm -rf never
  // walks into a live mount.
  for (const std::string& mount : MountsBelow(path_)) {
    ADD_FAILURE() << "still mounted at the end of the test: " << mount;
    RunCommand({"fusermount3", "-u", "-z", mount}, std::chrono::seconds(30));
  }
  for (int attempt = 0; attempt < 500; ++attempt) {
    if (PvdiskProcessesMentioning(path_).empty()) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  for (pid_t pid : PvdiskProcessesMentioning(path_)) {
    ADD_FAILURE() << "pvdisk process " << pid
                  << " still runs at the end of the test; killing it";
    kill(pid, SIGKILL);
  }
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::MakeDir(const std::string& name) const {
  std::string dir = Path(name);
  if (mkdir(dir.c_str(), 0755) != 0) {
    ADD_FAILURE() << "mkdir " << dir << ": " << std::strerror(errno);
  }
  return dir;
}

std::vector<std::string> AllTempDirs() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  return Registry();
}

// ---------------------------------------------------------------------------
// Commands

std::string CommandResult::Describe() const {
  std::string out =
      timed_out ? "timed out" : "exit code " + std::to_string(exit_code);
  out += "\n--- stdout ---\n" + this->out + "--- stderr ---\n" + err;
  return out;
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout) {
  CommandResult result;
  int out_fd = memfd_create("pvdisk-test-stdout", MFD_CLOEXEC);
  int err_fd = memfd_create("pvdisk-test-stderr", MFD_CLOEXEC);
  if (out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "memfd_create: " << std::strerror(errno);
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    return result;
  }
  pid_t pid = Spawn(argv, out_fd, err_fd);
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
  } else {
    auto deadline = steady_clock::now() + timeout;
    int status = 0;
    while (true) {
      pid_t got = waitpid(pid, &status, WNOHANG);
      if (got == pid) break;
      if (got < 0 && errno != EINTR) break;
      if (steady_clock::now() > deadline) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
    FillResult(status, &result);
    if (result.timed_out) result.exit_code = -1;
  }
  result.out = ReadFd(out_fd);
  result.err = ReadFd(err_fd);
  close(out_fd);
  close(err_fd);
  if (result.timed_out) {
    ADD_FAILURE() << "command timed out after " << timeout.count()
                  << " ms: " << Quote(argv);
  }
  return result;
}

const std::string& TestFuseIo() {
  static const std::string io = [] {
    const char* value = std::getenv("PVDISK_TEST_FUSE_IO");
    return std::string(value == nullptr ? "" : value);
  }();
  return io;
}

const std::string& TestPlacement() {
  static const std::string placement = [] {
    const char* value = std::getenv("PVDISK_TEST_PLACEMENT");
    return std::string(value == nullptr ? "" : value);
  }();
  return placement;
}

std::vector<std::string> WithTestFuseIo(std::vector<std::string> args) {
  // The command may follow the binary's path.
  auto command = std::find(args.begin(), args.end(), "mount");
  if (command == args.end()) return args;
  if (!TestPlacement().empty() &&
      std::find(args.begin(), args.end(), "--placement") == args.end() &&
      std::find(args.begin(), args.end(), "--help") == args.end()) {
    command = args.insert(command + 1, "--placement");
    command = args.insert(command + 1, TestPlacement()) - 2;
  }
  if (TestFuseIo().empty()) return args;
  for (const std::string& arg : args) {
    if (arg == "--fuse-io" || arg == "--fuse-threads" ||
        arg == "--fuse-queue-depth" || arg == "--help") {
      return args;
    }
  }
  // Right after the command: a flag at the end could become the value of a
  // flag the test left without one on purpose.
  command = args.insert(command + 1, "--fuse-io");
  args.insert(command + 1, TestFuseIo());
  return args;
}

void ExpectUsageError(const CommandResult& result) {
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 2) << result.Describe();
  EXPECT_EQ(result.err.rfind("pvdisk: ", 0), 0u) << result.Describe();
  ASSERT_FALSE(result.err.empty());
  EXPECT_EQ(result.err.back(), '\n') << result.Describe();
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
      << "not exactly one line: " << result.Describe();
  EXPECT_EQ(result.out, "") << result.Describe();
}

CommandResult RunPvdisk(const std::vector<std::string>& args,
                        std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {PvdiskBinary()};
  std::vector<std::string> with_io = WithTestFuseIo(args);
  argv.insert(argv.end(), with_io.begin(), with_io.end());
  return RunCommand(argv, timeout);
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv) {
  out_fd_ = memfd_create("pvdisk-test-bg-stdout", MFD_CLOEXEC);
  err_fd_ = memfd_create("pvdisk-test-bg-stderr", MFD_CLOEXEC);
  if (out_fd_ < 0 || err_fd_ < 0) {
    ADD_FAILURE() << "memfd_create: " << std::strerror(errno);
    return;
  }
  pid_ = Spawn(argv, out_fd_, err_fd_);
  if (pid_ < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0 && !done_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void BackgroundProcess::Collect(int status) {
  done_ = true;
  FillResult(status, &result_);
  result_.out = ReadFd(out_fd_);
  result_.err = ReadFd(err_fd_);
}

bool BackgroundProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return false;
  if (done_) return true;
  auto deadline = steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      Collect(status);
      return true;
    }
    if (steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// ---------------------------------------------------------------------------
// Mounts and processes

bool IsMounted(const std::string& path) { return MountCount(path) > 0; }

int MountCount(const std::string& path) {
  int count = 0;
  for (const MountInfo& info : ReadMountInfo()) {
    if (info.mount_point == path) ++count;
  }
  return count;
}

std::optional<pid_t> DaemonPidOf(const std::string& mountpoint) {
  std::optional<pid_t> pid;
  for (const MountInfo& info : ReadMountInfo()) {
    if (info.mount_point != mountpoint || info.fs_type != "fuse.pvdisk" ||
        info.source.rfind("pvdisk-", 0) != 0) {
      continue;
    }
    pid = static_cast<pid_t>(std::atol(info.source.c_str() + 7));
  }
  return pid;
}

bool PvdiskProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  char state = ProcessState(pid);
  return state != 0 && state != 'Z' && state != 'X' &&
         ProcessComm(pid) == "pvdisk";
}

std::vector<pid_t> PvdiskProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    if (!PvdiskProcessAlive(static_cast<pid_t>(pid))) continue;
    std::string cmdline =
        ReadSmallFile("/proc/" + std::to_string(pid) + "/cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(needle) != std::string::npos) {
      found.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return found;
}

ScopedTestFault::ScopedTestFault(const std::string& faults) {
  setenv("PVDISK_TEST_FAULT", faults.c_str(), /*overwrite=*/1);
}

ScopedTestFault::~ScopedTestFault() { unsetenv("PVDISK_TEST_FAULT"); }

Mount::Mount(std::string mountpoint, const std::vector<std::string>& args,
             std::chrono::seconds watchdog)
    : mountpoint_(std::move(mountpoint)) {
  std::vector<std::string> full = {"mount", mountpoint_};
  full.insert(full.end(), args.begin(), args.end());
  mount_result_ = RunPvdisk(full, std::chrono::seconds(60));
  ok_ = mount_result_.exit_code == 0 && IsMounted(mountpoint_);
  if (std::optional<pid_t> pid = DaemonPidOf(mountpoint_)) daemon_pid_ = *pid;
  if (daemon_pid_ > 0) {
    watchdog_ = std::thread([this, watchdog] { Watch(watchdog); });
  }
}

Mount::~Mount() {
  CleanUp();
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(watchdog_mu_);
      watchdog_stop_ = true;
    }
    watchdog_cv_.notify_all();
    watchdog_.join();
  }
}

void Mount::Watch(std::chrono::seconds limit) {
  // The daemon is our child (this process is a child subreaper, see
  // LeakCheckEnvironment), so reap it as soon as it exits: a zombie would
  // still look like a running pvdisk to `pvdisk unmount` and to pgrep.
  auto deadline = steady_clock::now() + limit;
  std::unique_lock<std::mutex> lock(watchdog_mu_);
  while (!watchdog_stop_) {
    waitpid(daemon_pid_, nullptr, WNOHANG);
    if (steady_clock::now() > deadline) {
      ADD_FAILURE() << "the mount at " << mountpoint_ << " lived longer than "
                    << limit.count() << " s (a request hangs?); SIGKILLing "
                    << "its daemon " << daemon_pid_ << " to unblock the test";
      if (PvdiskProcessAlive(daemon_pid_)) kill(daemon_pid_, SIGKILL);
      deadline = steady_clock::time_point::max();
    }
    watchdog_cv_.wait_for(lock, milliseconds(5));
  }
  waitpid(daemon_pid_, nullptr, WNOHANG);
}

CommandResult Mount::Unmount(std::chrono::milliseconds timeout) {
  return RunPvdisk({"unmount", mountpoint_}, timeout);
}

void Mount::CleanUp() {
  if (IsMounted(mountpoint_)) {
    CommandResult unmounted = Unmount();
    if (unmounted.exit_code != 0) {
      ADD_FAILURE() << "pvdisk unmount " << mountpoint_
                    << " failed: " << unmounted.Describe();
    }
  }
  if (IsMounted(mountpoint_)) {
    ADD_FAILURE() << mountpoint_ << " is still mounted after pvdisk unmount; "
                  << "detaching it";
    RunCommand({"fusermount3", "-u", "-z", mountpoint_},
               std::chrono::seconds(30));
  }
  if (daemon_pid_ > 0) {
    for (int attempt = 0; attempt < 1000 && PvdiskProcessAlive(daemon_pid_);
         ++attempt) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (PvdiskProcessAlive(daemon_pid_)) {
      ADD_FAILURE() << "pvdisk daemon " << daemon_pid_
                    << " still runs after its mount is gone; killing it";
      kill(daemon_pid_, SIGKILL);
    }
    // Under ThreadSanitizer: a race the daemon met fails this test.
    ExpectNoTsanReportFrom(daemon_pid_);
  }
}

// ---------------------------------------------------------------------------
// Files

int Fd::Close() {
  if (fd_ < 0) return 0;
  int result = close(fd_);
  fd_ = -1;
  return result;
}

Fd Open(const std::string& path, int flags, mode_t mode) {
  return Fd(open(path.c_str(), flags | O_CLOEXEC, mode));
}

std::string ReadWholeFile(const std::string& path) {
  Fd fd = Open(path, O_RDONLY);
  if (!fd.valid()) {
    ADD_FAILURE() << "open " << path << ": " << std::strerror(errno);
    return "";
  }
  std::string out;
  std::string buffer(1 << 20, '\0');
  while (true) {
    ssize_t n = read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ADD_FAILURE() << "read " << path << ": " << std::strerror(errno);
      break;
    }
    if (n == 0) break;
    out.append(buffer.data(), static_cast<size_t>(n));
  }
  return out;
}

void WriteWholeFile(const std::string& path, std::string_view data) {
  Fd fd = Open(path, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid()) << "open " << path << ": " << std::strerror(errno);
  PwriteAll(fd.get(), 0, data);
  ASSERT_EQ(fd.Close(), 0) << std::strerror(errno);
}

void FillFile(const std::string& path, uint64_t size, uint8_t fill) {
  Fd fd = Open(path, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid()) << "open " << path << ": " << std::strerror(errno);
  std::string chunk(4 << 20, static_cast<char>(fill));
  for (uint64_t at = 0; at < size; at += chunk.size()) {
    size_t length =
        static_cast<size_t>(std::min<uint64_t>(chunk.size(), size - at));
    PwriteAll(fd.get(), at, std::string_view(chunk.data(), length));
  }
  ASSERT_EQ(fd.Close(), 0) << std::strerror(errno);
}

std::string PreadAll(int fd, uint64_t offset, uint64_t length, uint64_t chunk) {
  std::string out(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    size_t want = static_cast<size_t>(std::min(chunk, length - done));
    ssize_t n =
        pread(fd, out.data() + done, want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ADD_FAILURE() << "pread of " << want << " bytes at " << offset + done
                    << " returned " << n
                    << (n < 0 ? std::string(": ") + std::strerror(errno) : "");
      out.resize(done);
      return out;
    }
    done += static_cast<uint64_t>(n);
  }
  return out;
}

void PwriteAll(int fd, uint64_t offset, std::string_view data) {
  uint64_t done = 0;
  while (done < data.size()) {
    ssize_t n = pwrite(fd, data.data() + done, data.size() - done,
                       static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << "pwrite of " << data.size() - done << " bytes at "
                    << offset + done << ": " << std::strerror(errno);
    done += static_cast<uint64_t>(n);
  }
}

std::string PatternBytes(uint64_t seed, size_t length) {
  std::string out(length, '\0');
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (size_t i = 0; i < length; i += 8) {
    // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(out.data() + i, &z, std::min<size_t>(8, length - i));
  }
  return out;
}

BlockCensus CountBlocks(std::string_view data, char old_byte, char new_byte) {
  constexpr size_t kBlock = 4096;
  const std::string old_block(kBlock, old_byte);
  const std::string new_block(kBlock, new_byte);
  BlockCensus census;
  for (size_t at = 0; at + kBlock <= data.size(); at += kBlock) {
    std::string_view block = data.substr(at, kBlock);
    if (block == new_block) {
      ++census.new_blocks;
    } else if (block == old_block) {
      ++census.old_blocks;
    } else if (++census.torn == 1) {
      census.first_torn = FirstDifference(old_block, block, at);
    }
  }
  return census;
}

std::string FirstDifference(std::string_view expected, std::string_view actual,
                            uint64_t base) {
  if (expected.size() != actual.size()) {
    return "length " + std::to_string(actual.size()) + ", expected " +
           std::to_string(expected.size());
  }
  if (std::memcmp(expected.data(), actual.data(), expected.size()) == 0) {
    return "";
  }
  size_t i = 0;
  while (expected[i] == actual[i]) ++i;
  size_t j = expected.size();
  while (expected[j - 1] == actual[j - 1]) --j;
  char text[200];
  std::snprintf(text, sizeof(text),
                "bytes differ in [%llu, %llu): first at %llu is 0x%02x, "
                "expected 0x%02x",
                static_cast<unsigned long long>(base + i),
                static_cast<unsigned long long>(base + j),
                static_cast<unsigned long long>(base + i),
                static_cast<unsigned char>(actual[i]),
                static_cast<unsigned char>(expected[i]));
  return text;
}

// ---------------------------------------------------------------------------
// Stats

namespace {

std::map<std::string, uint64_t> Counters(const JsonValue& object,
                                         const std::string& where) {
  std::map<std::string, uint64_t> counters;
  if (object.type != JsonValue::Type::kObject) {
    ADD_FAILURE() << where << " is not an object";
    return counters;
  }
  for (const auto& [name, value] : object.object) {
    // The latency histograms ("read_latency_ns", "write_latency_ns") are
    // arrays of [upper bound, count]; tests read them from the JSON itself.
    if (value.type == JsonValue::Type::kArray) continue;
    if (!value.is_unsigned) {
      ADD_FAILURE() << where << "." << name << " is not a whole number";
      continue;
    }
    counters[name] = value.unsigned_value;
  }
  return counters;
}

}  // namespace

uint64_t DiskStats::operator[](const std::string& counter) const {
  auto it = total.find(counter);
  if (it == total.end()) {
    ADD_FAILURE() << "stats.json of " << name << " has no total." << counter;
    return 0;
  }
  return it->second;
}

std::vector<DiskStats> ReadStats(const std::string& mountpoint) {
  std::vector<DiskStats> disks;
  std::string text = ReadWholeFile(mountpoint + "/stats.json");
  std::string error;
  std::optional<JsonValue> root = ParseJson(text, &error);
  if (!root) {
    ADD_FAILURE() << "stats.json is not valid JSON (" << error << "):\n"
                  << text;
    return disks;
  }
  const JsonValue* list = root->Find("disks");
  if (list == nullptr || list->type != JsonValue::Type::kArray) {
    ADD_FAILURE() << "stats.json has no \"disks\" array:\n" << text;
    return disks;
  }
  for (const JsonValue& disk : list->array) {
    DiskStats stats;
    if (const JsonValue* name = disk.Find("name")) stats.name = name->string;
    if (const JsonValue* config = disk.Find("config")) {
      for (const auto& [key, value] : config->object) {
        stats.config[key] = value.type == JsonValue::Type::kString
                                ? value.string
                                : std::to_string(value.unsigned_value);
      }
    }
    if (const JsonValue* queues = disk.Find("queues")) {
      for (const JsonValue& queue : queues->array) {
        stats.queues.push_back(Counters(queue, stats.name + ".queues[]"));
      }
    }
    if (const JsonValue* total = disk.Find("total")) {
      stats.total = Counters(*total, stats.name + ".total");
    } else {
      ADD_FAILURE() << "stats.json disk " << stats.name << " has no total";
    }
    disks.push_back(std::move(stats));
  }
  return disks;
}

DiskStats StatsOf(const std::string& mountpoint, const std::string& name) {
  for (DiskStats& disk : ReadStats(mountpoint)) {
    if (disk.name == name) return disk;
  }
  ADD_FAILURE() << "stats.json has no disk named " << name;
  DiskStats empty;
  empty.name = name;
  return empty;
}

void CreateImage(const std::string& path, uint64_t size_bytes) {
  const absl::Status created =
      io::CreateImage(path, size_bytes, /*force=*/false);
  ASSERT_TRUE(created.ok()) << created;
}

std::vector<std::string> FioCommand(const std::string& file,
                                    const std::vector<std::string>& extra) {
  // --verify_state_save=0: a verify job that fails would leave its state
  // file in the working directory, which tests running in parallel share.
  std::vector<std::string> argv = {"fio",
                                   "--name=pvdisk",
                                   "--filename=" + file,
                                   "--ioengine=io_uring",
                                   "--direct=1",
                                   "--group_reporting",
                                   "--verify_state_save=0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

void ExpectFioClean(const CommandResult& fio) {
  bool clean = fio.exit_code == 0 &&
               fio.out.find("err= 0") != std::string::npos &&
               fio.out.find("verify:") == std::string::npos &&
               fio.err.find("verify") == std::string::npos;
  EXPECT_TRUE(clean) << "fio failed or reported errors: " << fio.Describe();
}

const std::vector<std::string>& AllFrontends() {
  static const std::vector<std::string> frontends = {"blkif", "virtio",
                                                     "virtio-packed"};
  return frontends;
}

const std::vector<std::string>& OfferedFrontends() {
  static const std::vector<std::string> frontends = [] {
    std::vector<std::string> all = AllFrontends();
    all.push_back("nvme");
    return all;
  }();
  return frontends;
}

std::string FrontendTestName(const std::string& frontend) {
  std::string name = frontend;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

std::string FrontendEngineName(
    const ::testing::TestParamInfo<FrontendEngine>& info) {
  return FrontendTestName(std::get<0>(info.param)) + "_" +
         std::get<1>(info.param);
}

::testing::internal::ParamGenerator<FrontendEngine> FrontendsTimesEngines(
    const std::vector<std::string>& engines) {
  std::vector<FrontendEngine> params;
  for (const std::string& frontend : AllFrontends()) {
    for (const std::string& engine : engines) {
      params.emplace_back(frontend, engine);
    }
  }
  return ::testing::ValuesIn(params);
}

std::string MountFlagDefault(const std::string& flag) {
  static std::mutex mu;
  static std::string help;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (help.empty()) {
      CommandResult result = RunPvdisk({"mount", "--help"});
      EXPECT_EQ(result.exit_code, 0) << result.Describe();
      help = result.out;
    }
  }
  std::istringstream lines(help);
  std::string line;
  const std::string prefix = "  --" + flag + " ";
  const std::string marker = "(default: ";
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    size_t at = line.rfind(marker);
    size_t end = line.find(')', at);
    if (at == std::string::npos || end == std::string::npos) break;
    return line.substr(at + marker.size(), end - at - marker.size());
  }
  ADD_FAILURE() << "pvdisk mount --help states no default for --" << flag
                << ":\n"
                << help;
  return "";
}

size_t PossibleCpuCount() {
  std::string text = ReadWholeFile("/sys/devices/system/cpu/possible");
  size_t last = text.find_last_of(",-");
  std::string tail = last == std::string::npos ? text : text.substr(last + 1);
  return std::stoul(tail) + 1;
}

std::string DefaultPlacement(const DiskStats& stats) {
  if (!TestPlacement().empty()) return TestPlacement();
  auto io = stats.config.find("fuse_io");
  return io != stats.config.end() && io->second == "uring" ? "inline"
                                                           : "backend-thread";
}

size_t DefaultQueueCount(const DiskStats& stats) {
  auto placement = stats.config.find("placement");
  if (placement != stats.config.end() && placement->second == "inline") {
    return PossibleCpuCount();
  }
  std::string text = MountFlagDefault("queues");
  char* end = nullptr;
  unsigned long value = std::strtoul(text.c_str(), &end, 10);
  EXPECT_TRUE(!text.empty() && *end == '\0' && value > 0)
      << "default --queues '" << text << "'";
  return static_cast<size_t>(value);
}

uint64_t ConfigNumber(const DiskStats& stats, const std::string& key) {
  auto it = stats.config.find(key);
  if (it == stats.config.end()) {
    ADD_FAILURE() << "stats.json of " << stats.name << " has no config." << key;
    return 0;
  }
  char* end = nullptr;
  unsigned long long value = std::strtoull(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0') {
    ADD_FAILURE() << "config." << key << " of " << stats.name << " is '"
                  << it->second << "', not a number";
    return 0;
  }
  return value;
}

void ExpectTotalsAgreeWithQueues(const DiskStats& stats) {
  ASSERT_FALSE(stats.queues.empty()) << stats.name << " has no queues";
  for (const stats::CounterInfo& info : stats::kCounterInfo) {
    const std::string name(info.name);
    uint64_t sum = 0;
    uint64_t max = 0;
    for (size_t q = 0; q < stats.queues.size(); ++q) {
      auto it = stats.queues[q].find(name);
      if (it == stats.queues[q].end()) {
        ADD_FAILURE() << stats.name << " queue " << q << " has no " << name;
        continue;
      }
      sum += it->second;
      max = std::max(max, it->second);
    }
    const uint64_t expected = info.kind == stats::CounterKind::kMax ? max : sum;
    EXPECT_EQ(stats[name], expected)
        << name << " (total of " << stats.queues.size() << " queues, "
        << (info.kind == stats::CounterKind::kMax ? "highest" : "sum") << ")";
  }
}

void ResetStats(const std::string& mountpoint) {
  Fd fd = Open(mountpoint + "/stats", O_WRONLY | O_TRUNC);
  ASSERT_TRUE(fd.valid()) << "open stats: " << std::strerror(errno);
  ASSERT_EQ(write(fd.get(), "reset\n", 6), 6)
      << "reset stats: " << std::strerror(errno);
  ASSERT_EQ(fd.Close(), 0) << std::strerror(errno);
}

bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout) {
  auto deadline = steady_clock::now() + timeout;
  while (!condition()) {
    if (steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// ---------------------------------------------------------------------------
// Leak check after all tests of this process.

namespace {

// Makes this process the child subreaper, so that the daemons `pvdisk
// mount` leaves behind become our children (Mount reaps them), and checks
// after all tests that none is left.
class LeakCheckEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << std::strerror(errno);
  }

  void TearDown() override {
    // Reap whatever else was orphaned to us.
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    for (const std::string& dir : AllTempDirs()) {
      EXPECT_TRUE(MountsBelow(dir).empty())
          << "a test left a mount below " << dir;
      std::vector<pid_t> left;
      for (int attempt = 0; attempt < 500; ++attempt) {
        left = PvdiskProcessesMentioning(dir);
        if (left.empty()) break;
        std::this_thread::sleep_for(milliseconds(10));
      }
      EXPECT_TRUE(left.empty())
          << left.size() << " pvdisk process(es) started by the tests still "
          << "run (first pid " << (left.empty() ? 0 : left[0]) << ")";
      for (pid_t pid : left) kill(pid, SIGKILL);
      EXPECT_FALSE(std::filesystem::exists(dir))
          << "temp dir " << dir << " was not removed";
    }
  }
};

[[maybe_unused]] ::testing::Environment* const kLeakCheck =
    ::testing::AddGlobalTestEnvironment(new LeakCheckEnvironment);

}  // namespace

}  // namespace pvdisk::fuse_testing
