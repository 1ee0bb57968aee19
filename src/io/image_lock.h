// Image locking: one writer per image, across pvdisk and QEMU.
//
// pvdisk takes the same open-file-description (OFD) byte locks as QEMU's
// file-posix driver, so that pvdisk, qemu-storage-daemon and qemu see each
// other: a permission P (bit i: 0 consistent read, 1 write, 2 write
// unchanged, 3 resize) held is a shared lock on byte 100 + i; a permission
// not shared with others is a shared lock on byte 200 + i. A user conflicts
// with the image when it wants P while someone holds byte 200 + P, or refuses
// to share P while someone holds byte 100 + P. Locks are taken first and
// checked second, so of two users racing, at least one sees the other.
//
// A read-write disk holds read and write and shares only read (and unchanged
// writes): no second writer, no reader that expects the data to stay put. A
// read-only disk holds read and shares the same, so read-only disks share an
// image with each other but not with a writer. The locks belong to the open
// file description, so they last as long as the image stays open (the
// daemon's life) and no other descriptor's close() drops them.
#pragma once

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace pvdisk::io {

// How long a conflict may last before the image counts as in use. A daemon
// killed with SIGKILL keeps its locks until the kernel has torn down its
// io_uring, which first waits for the I/O the ring had in flight (usually
// milliseconds); a mount right after should not fail for that.
inline constexpr std::chrono::milliseconds kLockGrace{2000};

// Locks the image open as `fd` (named `path` in messages) for a read-write
// or read-only disk, trying again every few milliseconds for up to `grace`
// while another open of the image conflicts. Then returns FailedPrecondition
// with one line naming the image and that it is in use, and `fd` holds no
// lock.
absl::Status LockImage(int fd, const std::string& path, bool read_only,
                       std::chrono::milliseconds grace = kLockGrace);

// Takes the locks LockImage() takes, on `fd`, another open of an image that
// this mount's daemon has already locked with LockImage(), without looking
// for conflicts (the daemon's own locks would be one). For a backend
// process: its open keeps the image locked until its own last I/O is done,
// even if the daemon is gone before it.
absl::Status JoinImageLock(int fd, const std::string& path, bool read_only);

// Drops the locks LockImage() (or JoinImageLock()) took on `fd`. Closing the
// descriptor is not enough when something else still holds the open file
// description: an io_uring with the image as a registered file keeps it until
// the kernel has torn the ring down, after the process exits. So a daemon calls
// this once its I/O is done, and the image is free when `pvdisk unmount`
// returns.
void UnlockImage(int fd);

}  // namespace pvdisk::io
