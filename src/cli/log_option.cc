#include "cli/log_option.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace pvdisk::cli {
namespace {

// `dir` exists (made if missing, mode 0700) as a directory of ours.
absl::Status EnsureOwnDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot make the log directory ", dir, ": ",
                     strerror(errno), "; give --log FILE or --log syslog"));
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != geteuid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the log directory ", dir,
                     " is not a directory of this user; give --log FILE or "
                     "--log syslog"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LogChoice> CheckLogFlag(const std::string& value, bool given,
                                       bool foreground,
                                       const std::string& mountpoint) {
  LogChoice log;
  if (!given) {
    if (foreground) return log;  // stderr
    log.kind = LogChoice::Kind::kFile;
    absl::StatusOr<std::string> path = DefaultLogPath(mountpoint);
    if (!path.ok()) return path.status();
    log.path = *path;
    return log;
  }
  if (value == "syslog") {
    log.kind = LogChoice::Kind::kSyslog;
    return log;
  }
  if (value.empty() || value.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--log '", value,
                     "' is not a file; allowed: --log FILE or --log syslog"));
  }
  log.kind = LogChoice::Kind::kFile;
  if (value[0] == '/') {
    log.path = value;
  } else {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--log ", value, ": the current directory is unknown (",
                       strerror(errno), "); give an absolute path"));
    }
    log.path = absl::StrCat(cwd, "/", value);
  }
  return log;
}

absl::StatusOr<std::string> LogDirectory() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string dir;
  if (runtime != nullptr && runtime[0] == '/') {
    dir = absl::StrCat(runtime, "/pvdisk");
  } else {
    std::string user_run = absl::StrCat("/run/user/", geteuid());
    struct stat st;
    dir = stat(user_run.c_str(), &st) == 0 && S_ISDIR(st.st_mode)
              ? user_run + "/pvdisk"
              : absl::StrCat("/tmp/pvdisk-", geteuid());
  }
  absl::Status made = EnsureOwnDirectory(dir);
  if (!made.ok()) return made;
  return dir;
}

absl::StatusOr<std::string> DefaultLogPath(const std::string& mountpoint) {
  absl::StatusOr<std::string> dir = LogDirectory();
  if (!dir.ok()) return dir.status();
  std::string name = mountpoint.substr(mountpoint.find_first_not_of('/'));
  name = absl::StrReplaceAll(name, {{"/", "-"}});
  return absl::StrCat(*dir, "/", name, ".log");
}

absl::StatusOr<int> OpenLog(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--log ", path, " cannot be written: ", strerror(errno),
                     "; allowed: --log FILE (a file this user may write) or "
                     "--log syslog"));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("--log ", path,
                     " is not a regular file; allowed: --log FILE or "
                     "--log syslog"));
  }
  return fd;
}

std::string LogName(const LogChoice& log) {
  switch (log.kind) {
    case LogChoice::Kind::kFile:
      return log.path;
    case LogChoice::Kind::kSyslog:
      return "syslog";
    case LogChoice::Kind::kStderr:
      return "stderr";
  }
  return "stderr";
}

}  // namespace pvdisk::cli
