// Who may do what in the mount: the attributes (owner, group, mode, size,
// times) of each node, and the mount options that make the kernel enforce
// them. Free of libfuse, so that any FUSE request layer can use it.
//
// - A disk file shows its image's owner, group and permission bits, as
//   fstat() saw them when the image was opened; a read-only disk has no
//   write bits. With default_permissions the kernel checks them, so a
//   private image stays private in the mount.
// - The root directory belongs to the mount's owner (the daemon's user),
//   mode 0755.
// - `stats`, `stats.json` and `metrics` belong to the mount's owner, who alone
// may
//   write `stats` (reset). They show every disk's image path and I/O, so a
//   class of users (group, others) may read them only if it may read every
//   disk: they are as private as the most private disk.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "fuse/disk.h"

namespace pvdisk::fuse {

// The user and group that own the mount: the daemon's effective ones.
struct MountOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};
MountOwner CurrentMountOwner();

// The nodes of the mount's flat directory.
enum class Node { kRoot, kStats, kStatsJson, kTrace, kDisk };

// Fills every field of `st` but st_ino for `node`; `disk` is the disk for
// kDisk and ignored otherwise; `disks` are all disks of the mount (for the
// stats files). `mount_time` stands for the times of the nodes that are not
// disks.
void FillAttributes(Node node, const Disk* disk,
                    const std::vector<const Disk*>& disks,
                    const MountOwner& owner, const timespec& mount_time,
                    struct stat* st);

// The permission bits of the stats files (without the file type): owner
// read (and write if `writable`), and read for group or others only if every
// image in `images` is readable by that class (group meaning members of
// `owner.gid`).
mode_t StatsMode(const MountOwner& owner,
                 const std::vector<struct stat>& images, bool writable);

// The options pvdisk mounts with: fsname "pvdisk-PID" (how `pvdisk unmount`
// finds the daemon without touching the mountpoint), subtype pvdisk,
// default_permissions always, and allow_other only when asked for.
std::string FuseMountOptions(pid_t daemon_pid, bool allow_other);

}  // namespace pvdisk::fuse
