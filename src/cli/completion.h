// The bash completion script, written from the command table
// (command_table.h) by the build, as the man pages are: commands, each
// command's flags, and the values of flags that take one of a fixed set
// (e.g. --frontend blkif|virtio|virtio-packed).
#pragma once

#include <string>

namespace pvdisk::cli {

std::string BashCompletion();

}  // namespace pvdisk::cli
