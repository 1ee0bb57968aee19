// The table of --disk options: what the parser (disk_arg.h) names when it
// refuses an unknown one, what `pvdisk mount --help` lists and what the man
// page describes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pvdisk::cli {

struct DiskOptionInfo {
  std::string_view syntax;   // e.g. "format=raw|qcow2"
  std::string_view applies;  // "" (every disk), "qcow2" or "rbd"
  std::string_view help;
};

// Every option, in the order messages and pages list them.
const std::vector<DiskOptionInfo>& DiskOptions();

// The options a disk takes, for "allowed: ..." ("rbd" ones only if `rbd`).
std::string AllowedDiskOptions(bool rbd);

}  // namespace pvdisk::cli
