// The I/O fence: how the daemon knows that a dead backend process can no
// longer touch the disk or the data pages.
//
// A backend process killed with I/O in flight becomes a zombie before the
// kernel has finished that I/O: its io_uring is torn down asynchronously
// (the ring waits for its requests first). A write that landed after the
// daemon re-issued it, and after the application wrote the block again,
// would undo the newer data; a read that landed late would scribble over
// pages handed to another request. So the daemon re-issues nothing until
// the fence opens.
//
// The fence is an open-file-description (OFD) lock: the backend takes a
// shared lock on one byte of its own open of the image, and the kernel drops
// that lock only when the last reference to that open file description
// goes, which an io_uring request in flight (or a registered file) holds.
// OFD locks belong to the inode, so the daemon sees the backend's lock only
// on the same inode: the backend's open is made from the descriptor the
// daemon sent it (through /proc/self/fd), never from the image's path, so
// the inode the fence is tested on is the one the backend writes.
// The daemon asks (F_OFD_GETLK, which works on a read-only open too) until
// no other open holds a lock on that byte. Each backend has a byte of its
// own (NewFenceByte), far beyond QEMU's image locks on bytes 100..299 (see
// io/image_lock.h), so that two daemons sharing a read-only image do not
// wait for each other's backends.
#pragma once

#include <chrono>
#include <cstdint>

#include "absl/status/status.h"

namespace pvdisk::transport::process {

// A fence byte no other backend of any daemon uses (from the daemon's pid
// and a counter).
uint64_t NewFenceByte();

// In the backend: holds the fence byte on `image_fd` for as long as that
// open file description lives.
absl::Status HoldFence(int image_fd, uint64_t fence_byte);

// In the daemon: waits up to `timeout` until no other open file description
// holds `fence_byte` of the image open as `image_fd` (then none of a dead
// backend's I/O is in flight). DeadlineExceeded if it stays held.
absl::Status WaitForFence(int image_fd, uint64_t fence_byte,
                          std::chrono::milliseconds timeout);

}  // namespace pvdisk::transport::process
