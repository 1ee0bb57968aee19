// Linux native AIO by system call (no library needed), for tests that need
// several O_DIRECT writes of one FUSE file in flight at once: synchronous
// pwrite calls to one file are serialised by the kernel's inode lock and
// never race inside the daemon.
#pragma once

#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pvdisk::fuse_testing {

inline int IoSetup(unsigned depth, aio_context_t* context) {
  return static_cast<int>(syscall(SYS_io_setup, depth, context));
}
// Waits for what is still in flight, then frees the context.
inline int IoDestroy(aio_context_t context) {
  return static_cast<int>(syscall(SYS_io_destroy, context));
}
inline int IoSubmit(aio_context_t context, iocb* one) {
  iocb* list[1] = {one};
  return static_cast<int>(syscall(SYS_io_submit, context, 1, list));
}
// Waits for at least one completion; returns how many (up to `max`) were
// stored in `events`, or -1.
inline int IoGetEvents(aio_context_t context, long max, io_event* events) {
  return static_cast<int>(
      syscall(SYS_io_getevents, context, 1, max, events, nullptr));
}

}  // namespace pvdisk::fuse_testing
