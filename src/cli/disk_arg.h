// Parsing of one --disk argument:
// PATH[,ro][,lock=off][,format=raw|qcow2][,size=SIZE][,eio=SECTOR[+COUNT]][,delay=US]
// [,delay-write=US], or
// rbd:POOL/IMAGE[,conf=PATH][,id=CLIENT][,timeout=SECONDS] with the same
// options but lock= and format= (an RBD image has its own exclusive lock and is
// served raw).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuse/disk.h"

namespace pvdisk::cli {

absl::StatusOr<fuse::DiskSpec> ParseDiskArg(absl::string_view text);

}  // namespace pvdisk::cli
