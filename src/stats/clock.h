// The clock every stats timestamp and latency is taken from: CLOCK_MONOTONIC
// (std::chrono::steady_clock on Linux), in nanoseconds. `pvdisk stat` divides
// by differences of these, so they must never jump.
#pragma once

#include <chrono>
#include <cstdint>

namespace pvdisk::stats {

inline uint64_t MonotonicNanos() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace pvdisk::stats
