// The libfuse low-level operation table of a Filesystem. Each handler
// validates its arguments, hands disk I/O to the disk's DiskIo and returns;
// replies to I/O come from the completion path.
#pragma once

#include <fuse_lowlevel.h>

namespace pvdisk::fuse {

// The operations; the session's userdata must be the Filesystem.
const fuse_lowlevel_ops& FilesystemOps();

}  // namespace pvdisk::fuse
