// How long a spin lasts: the window as a pure function of --poll-us and of
// what the backend has seen, so that each rule is tested on its own
// (tests/transport/spin_window_test.cc). --poll-us 0 turns every spin off.
//
// For the completion of a lone I/O already on its way, the window follows
// how long such completions took lately: their moving average and half as
// much again for their spread. A window shorter than the completion wastes
// the whole spin and still pays the wake-up; one much longer only burns
// the CPU on the slow ones. On a virtual machine a lone 4 KiB read from the
// disk took 55-75 us, beyond the fixed 50 us spin this replaces, and the
// wake-up a missed spin leaves is dearest on the CPU that does not take
// the disk's interrupt (rr4k_qd1 with fio on that CPU: 8.0K IOPS with a
// 50 us spin, 12.8K with 150 us; native fio there 9.9K, measured
// 2026-12-06). When lone completions take longer than the cap, no spin
// could catch them: the window is 0 and the thread sleeps at once (a slow
// disk or a delay model of milliseconds costs no CPU).
//
// For the next request (a backend thread with nothing in flight) the
// window is --poll-us, as it always was: the sender runs on another thread,
// and how soon it sends is not the engine's to learn. The completion's
// window is capped at kCompletionSpinCapUs, or at --poll-us where that is
// longer.
#pragma once

#include <algorithm>
#include <cstdint>

namespace pvdisk::transport {

// pvdisk mount's --poll-us default, a backend thread's spin for its next
// request: at iodepth 1 it catches the next request before the backend
// sleeps (rr4k_qd1 0.51 -> 0.71 of native, measured 2026-11-30).
inline constexpr uint32_t kDefaultPollUs = 50;
// The longest spin for a completion, unless --poll-us is longer.
inline constexpr uint32_t kCompletionSpinCapUs = 200;

class SpinWindow {
 public:
  // A lone I/O (the only one in flight from submission to completion) took
  // `took_ns` from its submission until the backend saw its completion.
  void Record(uint64_t took_ns) {
    const int64_t sample = static_cast<int64_t>(
        std::min<uint64_t>(took_ns, uint64_t{kMaxSampleNs}));
    // ewma += (sample - ewma) / 8; the first sample starts it.
    ewma_ns_ = ewma_ns_ < 0 ? sample : ewma_ns_ + (sample - ewma_ns_) / 8;
  }

  // The spin for a completion on its way, in us, with --poll-us `poll_us`:
  // at most the cap (kCompletionSpinCapUs or poll_us, the longer); poll_us
  // until a lone I/O has been timed (a backend that never sees one, such as
  // a delay model at iodepth 2, spins as it always did, not the whole cap).
  uint32_t ForCompletionUs(uint32_t poll_us) const {
    if (poll_us == 0 || ewma_ns_ < 0) return poll_us;
    const uint32_t cap_us = std::max(poll_us, kCompletionSpinCapUs);
    const int64_t cap_ns = int64_t{cap_us} * 1000;
    if (ewma_ns_ > cap_ns) return 0;
    const int64_t window_ns = ewma_ns_ + ewma_ns_ / 2 + kSlackNs;
    return static_cast<uint32_t>(std::min(window_ns, cap_ns) / 1000);
  }

  // The spin for the next request, in us.
  static uint32_t ForNextRequestUs(uint32_t poll_us) { return poll_us; }

  // The moving average in ns; -1 before the first sample.
  int64_t average_ns() const { return ewma_ns_; }

 private:
  // A window never below this much over the average: the clock reads and
  // the turn of the spin loop.
  static constexpr int64_t kSlackNs = 2000;
  // Samples are clipped here (10 s): a stalled device does not take the
  // average to where it cannot come back from.
  static constexpr int64_t kMaxSampleNs = 10'000'000'000;

  int64_t ewma_ns_ = -1;
};

}  // namespace pvdisk::transport
