// pvdisk as a mount(8) helper: `mount -t fuse.pvdisk IMG[:IMG...] MNT -o
// OPTIONS` (and the same line in /etc/fstab) reaches mount.fuse3, which runs
// `pvdisk IMG[:IMG...] MNT -o OPTIONS`. That call is turned into the
// `pvdisk mount MNT --disk IMG ... --FLAG=VALUE ...` it stands for and
// executed, so that the daemon's command line is a `pvdisk mount` one
// (`pvdisk list` and `pvdisk unmount` read it) and `umount MNT` stops it as
// `pvdisk unmount` does (the daemon drains, flushes and releases its locks
// when the kernel ends its mount).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pvdisk::cli {

// Whether `args` (argv after the program name) is a mount helper call:
// SOURCE MOUNTPOINT [-o OPTIONS], with SOURCE no command's name and
// MOUNTPOINT an existing folder.
bool IsMountHelperCall(const std::vector<std::string>& args);

// The `pvdisk mount` arguments (after "mount") a helper call stands for.
// SOURCE is IMG[:IMG...]: each IMG a --disk spec with its options
// (IMG,ro,format=qcow2); rbd:POOL/IMAGE keeps its colon. OPTIONS are the
// mount flags by name without their dashes (queues=4, allow-other or
// allow_other), plus the options mount(8) and fstab add that concern no
// FUSE filesystem's daemon (rw, defaults, nofail, _netdev, x-..., ...);
// `ro` makes every disk read-only. Anything else is refused naming the
// allowed options.
absl::StatusOr<std::vector<std::string>> MountHelperArgs(
    const std::vector<std::string>& args);

// Runs a helper call: translates it and executes `pvdisk mount` in place.
int RunMountHelper(const std::vector<std::string>& args);

}  // namespace pvdisk::cli
