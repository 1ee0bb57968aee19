// WakeMargin: how early a sleep that must end at a given time should end,
// learned from how late such sleeps have ended.
//
// A sleeping CPU wakes late: on a virtual machine whose vCPU halted, a
// wake-up due in 2 ms comes 60-150 us after it (measured here). The delay
// model (io/delay_engine.h) ends its sleep early by this margin and spins
// the rest, so that a release is not late by the wake-up.
//
// The margin is a high percentile of the recent latenesses, not their
// worst: the last kWindow sleeps, the kSkipped latest of them ignored. On
// a shared machine a few wake-ups now and then come milliseconds late
// (another thread had the CPU); a margin that followed them would spin
// for its cap before every release (300 us in a 500 us delay: most of a
// CPU, taken from the threads that feed and answer the model), and still
// not cover them. The usual lateness is what the spin is for.
// Pure: no clock, no sleep.
#pragma once

#include <array>
#include <cstdint>

namespace pvdisk::io {

class WakeMargin {
 public:
  static constexpr int64_t kNanosPerMicro = 1'000;
  // The margin before any sleep has been seen.
  static constexpr int64_t kInitialNs = 20 * kNanosPerMicro;
  // Never more (the most spun per release).
  static constexpr int64_t kMaxNs = 300 * kNanosPerMicro;
  // Added to the percentile: a wake-up a little later than the usual one
  // is still covered.
  static constexpr int64_t kSlackNs = 10 * kNanosPerMicro;
  // The latenesses remembered, and how many of the latest of them the
  // margin leaves uncovered (6 of 64: about the 90th percentile).
  static constexpr unsigned kWindow = 64;
  static constexpr unsigned kSkipped = 6;

  // One sleep that was to end at a time ended `late_ns` after it; a
  // negative lateness (woken early, by something else) is ignored.
  void Learn(int64_t late_ns);
  int64_t margin_ns() const { return margin_ns_; }

 private:
  std::array<int64_t, kWindow> late_{};  // a ring of the last latenesses
  unsigned next_ = 0;                    // where the next one goes
  unsigned count_ = 0;                   // how many late_ holds (to kWindow)
  int64_t margin_ns_ = kInitialNs;
};

}  // namespace pvdisk::io
