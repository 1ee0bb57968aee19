// pvdisk unmount MOUNTPOINT
//
// Asks the daemon to stop (SIGTERM): it stops taking requests, finishes every
// request in flight, makes the images durable and unmounts, even while a
// program still has a disk open (that program then gets errors); I/O still
// unanswered after the daemon's --shutdown-timeout fails with EIO instead.
// Waits until the daemon has exited (its --shutdown-timeout plus a margin). If
// the daemon is already gone, detaches the dead mount instead.
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/daemon_args.h"
#include "cli/mount_table.h"
#include "fuse/disk.h"

namespace pvdisk::cli {
namespace {

// How long the daemon may take to exit beyond its --shutdown-timeout (the
// most it waits for I/O in flight): killing a backend, making the images
// durable, unmounting.
constexpr auto kDaemonExitMargin = std::chrono::seconds(30);

// True while `pid` runs. A zombie has finished (it exited; only its parent
// has not collected it yet), so it counts as gone.
bool ProcessExists(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat_file, line)) return false;
  // Format: "pid (comm) state ...", and comm may contain spaces or ')'.
  size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ||
         line[close + 2] != 'Z';
}

// Detaches a mount whose daemon is gone.
bool DetachMount(const std::string& path) {
  if (umount2(path.c_str(), MNT_DETACH) == 0) return true;
  // Not root: fusermount3 is setuid and allowed to unmount our own mounts.
  pid_t child = fork();
  if (child == 0) {
    execlp("fusermount3", "fusermount3", "-u", "-z", path.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child &&
         WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

const std::vector<FlagSpec>& UnmountFlags() {
  static const std::vector<FlagSpec> specs = {
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

int RunUnmount(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs("unmount", UnmountFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("unmount");
    return kExitOk;
  }
  if (parsed->positional.size() != 1) {
    PrintError(
        "unmount takes exactly one MOUNTPOINT (usage: pvdisk unmount "
        "MOUNTPOINT)");
    return kExitUsage;
  }
  const std::string& given = parsed->positional[0];
  std::optional<std::string> path = AbsoluteMountPath(given);
  std::optional<MountEntry> entry;
  if (path) entry = FindMount(*path);
  if (!entry) {
    PrintError(absl::StrCat(given, " is not mounted"));
    return kExitUsage;
  }
  std::optional<pid_t> pid = PvdiskDaemonPid(*entry);
  if (!pid) {
    PrintError(absl::StrCat(given, " is not a pvdisk mount (it is ",
                            entry->fs_type, " from ", entry->source,
                            "); use umount"));
    return kExitUsage;
  }
  if (!ProcessExists(*pid)) {
    if (!DetachMount(*path)) {
      PrintError(absl::StrCat(
          "the daemon of ", given,
          " is gone and the mount could not be detached: ", strerror(errno)));
      return kExitFailure;
    }
    std::printf("pvdisk: %s had no daemon (pid %d gone); detached the mount\n",
                given.c_str(), *pid);
    return kExitOk;
  }
  if (kill(*pid, SIGTERM) != 0) {
    PrintError(absl::StrCat("cannot signal the daemon (pid ", *pid,
                            "): ", strerror(errno)));
    return kExitFailure;
  }
  // A command line that cannot be read back gets the default timeout.
  const std::chrono::seconds exit_timeout =
      std::chrono::seconds(DaemonShutdownTimeout(*pid).value_or(
          fuse::kDefaultShutdownTimeoutSeconds)) +
      kDaemonExitMargin;
  auto deadline = std::chrono::steady_clock::now() + exit_timeout;
  while (ProcessExists(*pid) || FindMount(*path)) {
    if (std::chrono::steady_clock::now() > deadline) {
      PrintError(absl::StrCat("the daemon (pid ", *pid, ") of ", given,
                              " did not finish within ", exit_timeout.count(),
                              " s"));
      return kExitFailure;
    }
    // A daemon started by this shell stays a zombie until reaped; that
    // counts as gone.
    waitpid(*pid, nullptr, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("pvdisk: unmounted %s\n", given.c_str());
  return kExitOk;
}

}  // namespace pvdisk::cli
