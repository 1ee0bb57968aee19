#include "cli/daemon_args.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/mount_flags.h"
#include "fuse/disk.h"

namespace pvdisk::cli {

namespace {

// The whole of /proc/PID/cmdline, or nullopt. Read with read(2), not a
// stream: the daemon may exit while it is read (`pvdisk unmount` waits for
// exactly that), and a read of an exiting process's cmdline fails with
// ESRCH, which libstdc++'s filebuf throws through istreambuf_iterator.
std::optional<std::string> ReadCmdline(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/cmdline");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string raw;
  char chunk[4096];
  for (;;) {
    ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      close(fd);
      return std::nullopt;
    }
    if (got == 0) break;
    raw.append(chunk, static_cast<size_t>(got));
  }
  close(fd);
  return raw;
}

}  // namespace

std::optional<std::vector<std::string>> MountArguments(pid_t pid) {
  std::optional<std::string> cmdline = ReadCmdline(pid);
  if (!cmdline) return std::nullopt;
  const std::string& raw = *cmdline;
  std::vector<std::string> argv;
  for (size_t start = 0; start < raw.size();) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    argv.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  if (argv.size() < 2 || argv[1] != "mount") return std::nullopt;
  return std::vector<std::string>(argv.begin() + 2, argv.end());
}

std::optional<uint32_t> DaemonShutdownTimeout(pid_t pid) {
  std::optional<std::vector<std::string>> args = MountArguments(pid);
  if (!args) return std::nullopt;
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("mount", MountFlags(), *args);
  if (!parsed.ok()) return std::nullopt;
  absl::StatusOr<uint64_t> seconds = ParseNumber(
      "shutdown-timeout",
      parsed->Get("shutdown-timeout",
                  absl::StrCat(fuse::kDefaultShutdownTimeoutSeconds)),
      fuse::kMinShutdownTimeoutSeconds, fuse::kMaxShutdownTimeoutSeconds);
  if (!seconds.ok()) return std::nullopt;
  return static_cast<uint32_t>(*seconds);
}

}  // namespace pvdisk::cli
