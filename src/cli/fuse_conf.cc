#include "cli/fuse_conf.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pvdisk::cli {

bool FuseConfAllowsOther(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    // fusermount3 takes the option on a line by itself; a '#' starts a
    // comment.
    if (absl::StripAsciiWhitespace(line) == "user_allow_other") return true;
  }
  return false;
}

absl::Status CheckAllowOther(bool allow_other, bool root,
                             const std::string& path) {
  if (!allow_other || root || FuseConfAllowsOther(path)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--allow-other needs 'user_allow_other' in ", path,
      " when not run as root (ask an administrator to add that line), or "
      "mount without --allow-other so that only you reach the mount"));
}

}  // namespace pvdisk::cli
