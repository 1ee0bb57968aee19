#include "cli/mountpoint_check.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "cli/mount_table.h"

namespace pvdisk::cli {

absl::StatusOr<std::string> CheckMountpoint(const std::string& mountpoint) {
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) {
    // A dead FUSE mount answers ENOTCONN, or ECONNABORTED / ECANCELED while
    // the kernel is still tearing its connection (or its uring queues)
    // down (seen right after the daemon was killed).
    if (errno == ENOTCONN || errno == ECONNABORTED || errno == ECANCELED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mountpoint ", mountpoint,
          " is a FUSE mount whose daemon is gone; run 'fusermount3 -u ",
          mountpoint, "' first"));
    }
    return absl::InvalidArgumentError(
        errno == ENOENT
            ? absl::StrCat("mountpoint ", mountpoint, " does not exist")
            : absl::StrCat("mountpoint ", mountpoint,
                           " cannot be examined: ", strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mountpoint ", mountpoint, " is not a directory"));
  }
  std::optional<std::string> absolute = AbsoluteMountPath(mountpoint);
  if (!absolute) {
    return absl::InvalidArgumentError(
        absl::StrCat("mountpoint ", mountpoint, " cannot be resolved"));
  }
  if (std::optional<MountEntry> entry = FindMount(*absolute)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mountpoint ", mountpoint, " is already mounted (", entry->fs_type,
        " from ", entry->source, "); unmount it first"));
  }
  return *absolute;
}

}  // namespace pvdisk::cli
