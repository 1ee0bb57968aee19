#include "cli/mount_stats.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pvdisk::cli {

absl::StatusOr<MountEntry> RequirePvdiskMount(const std::string& path) {
  std::optional<std::string> absolute = AbsoluteMountPath(path);
  struct stat st;
  if (!absolute.has_value() ||
      (lstat(absolute->c_str(), &st) != 0 && errno == ENOENT)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " does not exist; give a pvdisk mountpoint"));
  }
  std::optional<MountEntry> entry = FindMount(*absolute);
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

absl::StatusOr<stats::StatsDocument> ReadMountStats(
    const std::string& mountpoint) {
  std::string path = mountpoint + "/stats.json";
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
  return stats::ParseStatsDocument(text);
}

}  // namespace pvdisk::cli
