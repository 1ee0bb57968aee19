// Parsing of one --disk argument:
// PATH[,ro][,lock=off][,size=SIZE][,eio=SECTOR[+COUNT]][,delay=US]
// [,delay-write=US][,engine_fail=N].
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuse/disk.h"

namespace pvdisk::cli {

absl::StatusOr<fuse::DiskSpec> ParseDiskArg(absl::string_view text);

}  // namespace pvdisk::cli
