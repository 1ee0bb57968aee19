#include "fuse/disk_list_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fuse/disk_options_check.h"
#include "fuse/inodes.h"
#include "image/open_image.h"
#include "trace/trace_control.h"

namespace pvdisk::fuse {
namespace {

// The names the mount's own files take (the hidden trace control file
// too: a disk of that name could not be looked up).
bool IsStatsFileName(std::string_view name) {
  return name == kStatsName || name == kStatsJsonName || name == kMetricsName ||
         name == trace::kTraceName;
}

// The checks of an rbd: disk that need no cluster: its conf= exists (and
// becomes absolute), it is not given twice, its name is allowed. Returns
// the file name in the mount: the image's.
absl::StatusOr<std::string> CheckRbdDisk(DiskSpec* spec,
                                         std::set<std::string>* seen) {
  io::RbdSpec& rbd = *spec->rbd;
  if (!rbd.conf.empty()) {
    char resolved[PATH_MAX];
    if (realpath(rbd.conf.c_str(), resolved) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disk ", spec->arg, ": Ceph configuration ", rbd.conf,
          errno == ENOENT
              ? " does not exist"
              : absl::StrCat(" cannot be resolved: ", strerror(errno))));
    }
    rbd.conf = resolved;
  }
  if (!seen->insert(absl::StrCat(rbd.Name(), "\n", rbd.conf)).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("--disk ", rbd.Name(),
                     " is given twice; each image may be served "
                     "once"));
  }
  if (IsStatsFileName(rbd.image)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image ", rbd.Name(), " would be named '", rbd.image,
        "' in the mount, which is the name of one of the mount's own files; "
        "rename the image"));
  }
  return rbd.image;
}

// The checks of an image file's disk; makes its path absolute. Returns the
// file name in the mount: the image file's.
absl::StatusOr<std::string> CheckFileDisk(DiskSpec* spec,
                                          const std::string& mountpoint,
                                          std::set<std::string>* seen,
                                          std::set<std::string>* names) {
  char resolved[PATH_MAX];
  if (realpath(spec->path.c_str(), resolved) == nullptr) {
    return absl::InvalidArgumentError(
        errno == ENOENT
            ? absl::StrCat("image ", spec->path, " does not exist")
            : absl::StrCat("image ", spec->path,
                           " cannot be resolved: ", strerror(errno)));
  }
  const std::string path = resolved;
  if (path.rfind(mountpoint + "/", 0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image ", spec->path,
        " lies inside the mountpoint; the daemon never touches its own "
        "mountpoint, so keep images outside it"));
  }
  if (!seen->insert(path).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("--disk ", spec->path,
                     " is given twice; each image may be served "
                     "once"));
  }
  std::string name = path.substr(path.rfind('/') + 1);
  if (IsStatsFileName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image ", spec->path, " would be named '", name,
        "' in the mount, which is the name of one of the mount's own files; "
        "rename the image"));
  }
  if (!names->insert(name).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("two images would both be named '", name,
                     "' in the mount; rename one of them"));
  }
  // Open once now (no lock, no O_DIRECT), so that an unreadable or
  // odd-sized image is reported here, before anything is mounted.
  image::ImageSpec probe = ImageSpecOf(*spec, io::EngineKind::kNull);
  probe.path = path;
  probe.lock = false;
  PVDISK_ASSIGN_OR_RETURN(std::shared_ptr<image::Image> image,
                          image::OpenImage(probe));
  PVDISK_RETURN_IF_ERROR(CheckDiskSpec(*spec, image->size_bytes()));
  spec->path = path;
  return name;
}

// The checks of a disk's log=FILE: makes it absolute, and refuses a log
// inside the mountpoint, one that is an image or another disk's log, and
// one that cannot be written (its directory's or its own permissions), so
// that nothing is mounted with a log that cannot be written.
absl::Status CheckLogPath(DiskSpec* spec, const std::string& mountpoint,
                          std::set<std::string>* seen) {
  if (spec->log_path.empty()) return absl::OkStatus();
  const std::string& given = spec->log_path;
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--disk ", spec->path, ",log=", given, ": ", why));
  };
  const size_t slash = given.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : given.substr(0, slash);
  const std::string base =
      slash == std::string::npos ? given : given.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") {
    return refuse("log takes a file, not a directory");
  }
  char resolved[PATH_MAX];
  if (realpath(dir.c_str(), resolved) == nullptr) {
    return refuse(absl::StrCat("cannot write the log: its directory ", dir,
                               ": ", strerror(errno)));
  }
  const std::string path =
      absl::StrCat(std::string(resolved) == "/" ? "" : resolved, "/", base);
  if (path.rfind(mountpoint + "/", 0) == 0) {
    return refuse("the log lies inside the mountpoint; keep it outside");
  }
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return refuse("the log must be a regular file");
    if (access(path.c_str(), W_OK) != 0) {
      return refuse(absl::StrCat("cannot write the log: ", strerror(errno)));
    }
  } else if (access(resolved, W_OK | X_OK) != 0) {
    return refuse(absl::StrCat("cannot create the log in ", resolved, ": ",
                               strerror(errno)));
  }
  if (!seen->insert(path).second) {
    return refuse("the log is an image or another disk's log");
  }
  spec->log_path = path;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckedDisks> CheckDiskList(std::vector<DiskSpec> specs,
                                           const std::string& mountpoint) {
  CheckedDisks checked;
  std::set<std::string> seen_paths;
  std::set<std::string> seen_names;
  for (DiskSpec& spec : specs) {
    std::string name;
    if (spec.rbd) {
      PVDISK_ASSIGN_OR_RETURN(name, CheckRbdDisk(&spec, &seen_paths));
      if (!seen_names.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("two images would both be named '", name,
                         "' in the mount; serve one of them per mount"));
      }
    } else {
      PVDISK_ASSIGN_OR_RETURN(
          name, CheckFileDisk(&spec, mountpoint, &seen_paths, &seen_names));
    }
    PVDISK_RETURN_IF_ERROR(CheckLogPath(&spec, mountpoint, &seen_paths));
    checked.disks.push_back(std::move(spec));
    checked.names.push_back(std::move(name));
  }
  return checked;
}

}  // namespace pvdisk::fuse
