// InterruptHandler: the frontend's side of a queue's interrupt, as the
// backend sees it.
//
// A backend that publishes responses and finds that the frontend asked to be
// told (PushResult::kNotify) interrupts it in one of two ways:
// - thread: it signals the queue's interrupt eventfd, and the frontend's
//   completion thread wakes up and runs the handler (a guest vCPU taking the
//   interrupt);
// - inline: it calls HandleInterrupt() itself, on the backend thread, right
//   after publishing (the interrupt taken on the CPU that raised it: no
//   eventfd, no thread switch).
// Either way the frontend consumes responses only through the ring, so the
// protocol, its validation and its counters are the same.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace pvdisk::transport {

enum class InterruptMode { kInline, kThread };

absl::StatusOr<InterruptMode> ParseInterruptMode(std::string_view text);
std::string_view InterruptModeName(InterruptMode mode);

class InterruptHandler {
 public:
  virtual ~InterruptHandler() = default;
  // Consumes every published response and completes what they finish.
  // May run on any thread; never waits for I/O.
  virtual void HandleInterrupt() = 0;
  // The backend stopped serving the ring for good (the frontend published
  // an impossible index) after answering every request it had taken: fail
  // whatever else waits on the ring, and every request from now on, with
  // EIO. Called once, on the backend thread.
  virtual void OnRingStopped() = 0;
};

}  // namespace pvdisk::transport
