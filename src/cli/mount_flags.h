// The flags of `pvdisk mount`, shared with `pvdisk list`, which reads a
// daemon's command line back to show the flags it was mounted with.
#pragma once

#include <vector>

#include "cli/args.h"

namespace pvdisk::cli {

const std::vector<FlagSpec>& MountFlags();

}  // namespace pvdisk::cli
