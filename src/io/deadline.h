// Deadlines of the engines' waits: CLOCK_MONOTONIC times in nanoseconds
// (IoEngine::RunUntil), and the helpers that turn one into what a sleeping
// call takes.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>

namespace pvdisk::io {

// "No deadline": the wait ends only when something arrives.
inline constexpr int64_t kNoDeadline = INT64_MAX;
inline constexpr int64_t kNanosPerSecond = 1'000'000'000;

inline int64_t MonotonicNowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * kNanosPerSecond + now.tv_nsec;
}

// The time from now until `deadline_ns` (zero once it has passed), for
// ppoll() and io_uring waits, which take a relative timeout.
inline timespec TimeLeft(int64_t deadline_ns) {
  const int64_t left = std::max<int64_t>(deadline_ns - MonotonicNowNs(), 0);
  return timespec{static_cast<time_t>(left / kNanosPerSecond),
                  static_cast<long>(left % kNanosPerSecond)};
}

}  // namespace pvdisk::io
