// MountArguments and DaemonShutdownTimeout (cli/daemon_args.h): a running
// process's `pvdisk mount` arguments read back from /proc/PID/cmdline, on
// real processes; and nothing (never an exception) for a process that is
// not one, that has exited, or that exits while it is read.
#include "cli/daemon_args.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

// A child whose argv is {"pvdisk", "mount", args...}: /bin/sh running the
// script file "mount" in `dir` (which sleeps), so sh keeps that argv.
pid_t StartFakeDaemon(const pvdisk::testing::TempDir& dir,
                      const std::vector<std::string>& args) {
  std::ofstream(dir.File("mount")) << "sleep 30\n";
  std::vector<std::string> argv = {"pvdisk", "mount"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    if (chdir(dir.File("").c_str()) != 0) _exit(127);
    std::vector<char*> raw;
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    execv("/bin/sh", raw.data());
    _exit(127);
  }
  return pid;
}

void Stop(pid_t pid) {
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Until sh has exec'ed (the forked child still has the test's argv).
std::optional<std::vector<std::string>> ArgumentsOnceStarted(pid_t pid) {
  for (int i = 0; i < 2000; ++i) {
    std::optional<std::vector<std::string>> args = MountArguments(pid);
    if (args) return args;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::nullopt;
}

TEST(DaemonArgsTest, AMountProcessGivesItsArgumentsAndShutdownTimeout) {
  pvdisk::testing::TempDir dir("pvdisk_daemon_args_test");
  pid_t pid = StartFakeDaemon(
      dir, {"MNT", "--disk", "a.img", "--shutdown-timeout", "7"});
  ASSERT_GT(pid, 0);
  std::optional<std::vector<std::string>> args = ArgumentsOnceStarted(pid);
  ASSERT_TRUE(args.has_value());
  EXPECT_EQ(*args, (std::vector<std::string>{"MNT", "--disk", "a.img",
                                             "--shutdown-timeout", "7"}));
  EXPECT_EQ(DaemonShutdownTimeout(pid), 7u);
  Stop(pid);
}

TEST(DaemonArgsTest, OtherProcessesAndExitedOnesGiveNothing) {
  EXPECT_FALSE(MountArguments(getpid()).has_value());  // not `pvdisk mount`
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  ASSERT_GT(pid, 0);
  waitpid(pid, nullptr, 0);
  EXPECT_FALSE(MountArguments(pid).has_value());  // reaped: no /proc entry
  EXPECT_FALSE(DaemonShutdownTimeout(pid).has_value());
}

// `pvdisk unmount` reads the daemon's command line while the daemon exits;
// a read that meets the exit must give nothing, not end the program (it
// once threw from a stream: "basic_filebuf::underflow error reading the
// file: No such process").
TEST(DaemonArgsTest, ReadingWhileTheProcessExitsNeverThrows) {
  pvdisk::testing::TempDir dir("pvdisk_daemon_args_test");
  for (int round = 0; round < 50; ++round) {
    pid_t pid = StartFakeDaemon(dir, {"MNT", "--disk", "a.img"});
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(ArgumentsOnceStarted(pid).has_value());
    // Killed and reaped while it is read: a read after the reap fails
    // with ESRCH on a file opened before it.
    std::thread killer([pid] {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    });
    for (int i = 0; i < 200; ++i) {
      EXPECT_NO_THROW(MountArguments(pid));
    }
    killer.join();
  }
}

}  // namespace
}  // namespace pvdisk::cli
