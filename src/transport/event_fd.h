// An eventfd used as a notification channel (Xen's event channel, virtio's
// kick or interrupt). Signal() may be called from any thread.
#pragma once

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
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
  // cannot realistically reach its 2^64-2 limit). Notes the CPU it ran on
  // (LastSignal()).
  void Signal() {
    NoteSignal();
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

  // Where the latest Signal() in this process came from, for a reader that
  // follows its signaller (kick_follow.h): `count` changes with every
  // signal (it may skip values when two signal at once), `cpu` is the CPU
  // the signaller ran on, or -1 if unknown. A signal written to the fd by
  // another process is not seen here. Any thread.
  struct SignalSource {
    uint32_t count = 0;
    int cpu = -1;
  };
  SignalSource LastSignal() const {
    const uint64_t packed = last_signal_.load(std::memory_order_relaxed);
    return {static_cast<uint32_t>(packed >> 32),
            static_cast<int>(static_cast<uint32_t>(packed)) - 1};
  }

 private:
  explicit EventFd(int fd) : fd_(fd) {}

  // The count in the high half, the CPU + 1 in the low half (0: unknown).
  // A plain load and store: racing signallers may lose a count, never the
  // fact that one came.
  void NoteSignal() {
    const int cpu = sched_getcpu();
    const uint64_t count =
        (last_signal_.load(std::memory_order_relaxed) >> 32) + 1;
    last_signal_.store(
        (count << 32) | static_cast<uint32_t>(cpu < 0 ? 0 : cpu + 1),
        std::memory_order_relaxed);
  }

  int fd_;
  std::atomic<uint64_t> last_signal_{0};
};

}  // namespace pvdisk::transport
