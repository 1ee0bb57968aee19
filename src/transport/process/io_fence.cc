#include "transport/process/io_fence.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "base/errno_status.h"

namespace pvdisk::transport::process {
namespace {

// Fence bytes start here: 1 TiB, beyond any lock QEMU or pvdisk take.
constexpr uint64_t kFenceBase = uint64_t{1} << 40;

struct flock FenceLock(short type, uint64_t fence_byte) {
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = static_cast<off_t>(fence_byte);
  lock.l_len = 1;
  return lock;
}

}  // namespace

uint64_t NewFenceByte() {
  static std::atomic<uint64_t> next{0};
  // pid_max is at most 2^22; 2^16 backends per daemon is plenty.
  return kFenceBase + (uint64_t{static_cast<uint32_t>(getpid())} << 16) +
         (next.fetch_add(1) & 0xffff);
}

absl::Status HoldFence(int image_fd, uint64_t fence_byte) {
  struct flock lock = FenceLock(F_RDLCK, fence_byte);
  if (fcntl(image_fd, F_OFD_SETLK, &lock) != 0) {
    return ErrnoError(errno, "lock of the image's fence byte");
  }
  return absl::OkStatus();
}

absl::Status WaitForFence(int image_fd, uint64_t fence_byte,
                          std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    struct flock lock = FenceLock(F_WRLCK, fence_byte);
    if (fcntl(image_fd, F_OFD_GETLK, &lock) != 0) {
      return ErrnoError(errno, "test of the image's fence byte");
    }
    if (lock.l_type == F_UNLCK) return absl::OkStatus();
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          "the dead backend's I/O did not finish in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace pvdisk::transport::process
