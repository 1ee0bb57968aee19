#include "cli/mount_stats.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace pvdisk::cli {

absl::StatusOr<MountEntry> RequirePvdiskMount(const std::string& path) {
  std::optional<std::string> absolute = AbsoluteMountPath(path);
  // The mount table first: a stat of a mount point asks its daemon, which
  // may not answer.
  std::optional<MountEntry> entry;
  if (absolute.has_value()) entry = FindMount(*absolute);
  struct stat st;
  if (!entry.has_value() &&
      (!absolute.has_value() ||
       (lstat(absolute->c_str(), &st) != 0 && errno == ENOENT))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " does not exist; give a pvdisk mountpoint"));
  }
  if (!entry.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a mount point; give a pvdisk mountpoint"));
  }
  if (!PvdiskDaemonPid(*entry).has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a ", entry->fs_type,
                     " mount, not a pvdisk one; give a pvdisk mountpoint"));
  }
  return *entry;
}

std::vector<MountEntry> AllPvdiskMounts() {
  std::vector<MountEntry> out;
  for (const MountEntry& entry : AllMounts()) {
    if (PvdiskDaemonPid(entry).has_value()) out.push_back(entry);
  }
  return out;
}

namespace {

// Reads all of `path`: its bytes, or Unavailable naming the path.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  }
  std::string text;
  char buffer[65536];
  ssize_t got;
  while ((got = read(fd, buffer, sizeof(buffer))) > 0 ||
         (got < 0 && errno == EINTR)) {
    if (got > 0) text.append(buffer, static_cast<size_t>(got));
  }
  int read_errno = errno;
  close(fd);
  if (got < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", path, ": ", strerror(read_errno)));
  }
  return text;
}

// Reads `path` in a child process and returns its bytes, or Unavailable
// when no answer comes within `timeout`. A read of a FUSE file whose
// request the daemon has already taken (always so on FUSE over io_uring,
// where requests go straight into the daemon's ring) cannot be interrupted,
// not even by SIGKILL, until the daemon answers: a thread of ours stuck in
// it would keep the process from exiting. A child stuck in it does not: it
// is left behind and ends when the daemon answers or the mount is aborted.
absl::StatusOr<std::string> ReadWithin(const std::string& path,
                                       absl::Duration timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", path, ": pipe: ", strerror(errno)));
  }
  const pid_t child = fork();
  if (child < 0) {
    int fork_errno = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::UnavailableError(
        absl::StrCat("cannot read ", path, ": fork: ", strerror(fork_errno)));
  }
  if (child == 0) {
    close(fds[0]);
    // Holds none of the caller's output open: a caller's reader (a shell's
    // pipe, a test harness) sees its end when the caller exits, even while
    // this child is still stuck.
    const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    absl::StatusOr<std::string> text = ReadWholeFile(path);
    // The parent tells the outcome by the first byte: '+' the file follows,
    // '-' the error message does.
    std::string out(1, text.ok() ? '+' : '-');
    if (text.ok()) {
      out.append(*text);
    } else {
      out.append(text.status().message().data(),
                 text.status().message().size());
    }
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t put = write(fds[1], p, left);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) _exit(1);
      p += put;
      left -= static_cast<size_t>(put);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  bool eof = false;
  while (!eof) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    struct pollfd pfd = {fds[0], POLLIN, 0};
    const int ready =
        left_ms > 0 ? poll(&pfd, 1, static_cast<int>(left_ms)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char buffer[65536];
    const ssize_t got = read(fds[0], buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      eof = true;
    } else {
      out.append(buffer, static_cast<size_t>(got));
    }
  }
  close(fds[0]);
  if (!eof) {
    // Left running; its write to the closed pipe ends it once it gets out.
    return absl::UnavailableError(absl::StrCat(
        "the daemon did not answer a read of ", path, " within ",
        absl::FormatDuration(timeout),
        " (stopped or hung; unmount it with pvdisk unmount, or fusermount3 "
        "-u -z if it never answers)"));
  }
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (out.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot read ", path));
  }
  if (out[0] == '-') return absl::UnavailableError(out.substr(1));
  return out.substr(1);
}

}  // namespace

absl::StatusOr<stats::StatsDocument> ReadMountStats(
    const std::string& mountpoint, absl::Duration timeout) {
  PVDISK_ASSIGN_OR_RETURN(std::string text,
                          ReadWithin(mountpoint + "/stats.json", timeout));
  return stats::ParseStatsDocument(text);
}

absl::Status SendStatsCommand(const std::string& mountpoint,
                              std::string_view command,
                              std::string_view refused) {
  const std::string stats_path = absl::StrCat(mountpoint, "/stats");
  const int fd = open(stats_path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open ", stats_path, ": ", std::strerror(errno)));
  }
  const ssize_t written = write(fd, command.data(), command.size());
  const int write_errno = errno;
  close(fd);
  if (written != static_cast<ssize_t>(command.size())) {
    return absl::ErrnoToStatus(
        write_errno,
        absl::StrCat(std::string(refused), ": ", std::strerror(write_errno),
                     " (its log says why)"));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::cli
