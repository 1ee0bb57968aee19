#include "cli/fuse_conf.h"

#include <fstream>

#include "absl/strings/ascii.h"

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

}  // namespace pvdisk::cli
