// pvdisk attach and pvdisk detach: a disk added to, or taken from, a
// running mount. The client checks what it can, then writes the command
// into the mount's `.control` file (fuse/disk_control.h); the daemon opens
// the disk with OpenAttachedDisk, with the mount's settings where the
// command gives none.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/args.h"
#include "fuse/disk.h"

namespace pvdisk::cli {

// What the daemon keeps of its mount for attach.
struct AttachContext {
  std::string mountpoint;
  // The disks' options as the mount's run (the payload arena granted).
  fuse::DiskOptions options;
  // The mount's flags as given (the last value of each).
  std::map<std::string, std::string, std::less<>> mount_flags;
  uint64_t memory_budget = 0;  // --max-memory
};

// The daemon's side: opens (and does not start) the disk that `words`
// (pvdisk attach's words after MOUNTPOINT) ask for. The transport flags
// given override the mount's; a disk attached to a mount of the inline
// placement runs on backend threads of its own. The memory budget counts
// the `attached` disks. Errors are one line.
absl::StatusOr<std::unique_ptr<fuse::Disk>> OpenAttachedDisk(
    const AttachContext& context, const std::vector<std::string>& words,
    const std::vector<const fuse::Disk*>& attached);

}  // namespace pvdisk::cli
