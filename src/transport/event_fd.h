// An eventfd used as a notification channel (Xen's event channel, virtio's
// kick or interrupt). Signal() may be called from any thread.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "base/errno_status.h"

namespace pvdisk::transport {

class EventFd {
 public:
  static absl::StatusOr<std::unique_ptr<EventFd>> Create() {
    int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0) return ErrnoError(errno, "eventfd");
    return std::unique_ptr<EventFd>(new EventFd(fd));
  }
  // Takes ownership of `fd`, an eventfd made elsewhere (a backend process
  // receives its kick and interrupt eventfds this way).
  static std::unique_ptr<EventFd> Adopt(int fd) {
    return std::unique_ptr<EventFd>(new EventFd(fd));
  }
  ~EventFd() { close(fd_); }
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  // Adds one to the counter, waking a reader. Never blocks (the counter
  // cannot realistically reach its 2^64-2 limit).
  void Signal() {
    uint64_t one = 1;
    while (write(fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  }

  // Blocks until the counter is non-zero, then clears it. Returns the count,
  // or 0 if interrupted.
  uint64_t Wait() {
    uint64_t value = 0;
    if (read(fd_, &value, sizeof(value)) != sizeof(value)) return 0;
    return value;
  }

  // Like Wait(), but gives up after `timeout_ns` (negative: never). Returns
  // the count, or 0 on timeout.
  uint64_t WaitFor(int64_t timeout_ns) {
    if (timeout_ns < 0) return Wait();
    pollfd watched{fd_, POLLIN, 0};
    timespec timeout{static_cast<time_t>(timeout_ns / 1000000000),
                     static_cast<long>(timeout_ns % 1000000000)};
    if (ppoll(&watched, 1, &timeout, nullptr) <= 0) return 0;
    return Wait();
  }

  int fd() const { return fd_; }

 private:
  explicit EventFd(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace pvdisk::transport
