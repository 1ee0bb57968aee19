// ArrivalPoll: how long the thread that receives a latency model's new
// requests should stay awake for the next one, while the model holds
// completions (io/delay_engine.h).
//
// A request's submitter sends its next request soon after it is answered
// (fio reaps a completion and submits at once), so after the model
// releases completions the next arrival usually follows within one round
// trip. A thread that sleeps meanwhile pays its wake-up on that arrival:
// on a virtual machine whose idle vCPU halts, 60-150 us (measured here),
// which is 12-30% of a 500 us model. So after each release the thread may
// spin, up to the gap between a release and the next arrival that it has
// seen (tracked high: up by half the difference, down by 1/64 of it, plus
// a slack), and only while the model still holds completions: an idle
// mount never spins. When the gaps it sees are longer than kMaxWindowNs
// it does not spin at all: a spin that usually ends before the arrival
// costs a CPU and saves nothing.
//
// Pure: the caller passes the clock (CLOCK_MONOTONIC, ns). Not thread-safe
// (the thread that runs the engine owns it).
#pragma once

#include <cstdint>

namespace pvdisk::io {

class ArrivalPoll {
 public:
  // The longest spin after a release. Beyond it a spin costs more CPU than
  // the wake-up it saves is worth at the delays the model is for (0.5-2 ms).
  static constexpr int64_t kMaxWindowNs = 150'000;
  // Added to the tracked gap: arrivals come a little later than the usual.
  static constexpr int64_t kSlackNs = 10'000;
  // The gap assumed before one was seen.
  static constexpr int64_t kInitialGapNs = 40'000;

  // Completions were released at `now_ns` (their submitters are answered).
  void Released(int64_t now_ns) {
    released_ns_ = now_ns;
    awaiting_ = true;
  }

  // A request arrived at `now_ns`. The first after a release tells the gap.
  void Arrived(int64_t now_ns) {
    if (!awaiting_) return;
    awaiting_ = false;
    const int64_t gap = now_ns - released_ns_;
    if (gap < 0) return;
    gap_ns_ += gap > gap_ns_ ? (gap - gap_ns_) / 2 : (gap - gap_ns_) / 64;
  }

  // How long the spin after a release lasts: 0 when the gaps seen are too
  // long for a spin to catch.
  int64_t WindowNs() const {
    const int64_t window = gap_ns_ + kSlackNs;
    return window > kMaxWindowNs ? 0 : window;
  }

  // Until when (ns) the receiving thread should spin for the next arrival
  // rather than sleep, from `now_ns`; 0 when it should not spin: nothing is
  // `holding` (so no submitter waits for an answer that would send a next
  // request), no release yet, or the window since the last release is over.
  int64_t SpinUntilNs(int64_t now_ns, bool holding) const {
    if (!holding || released_ns_ == 0) return 0;
    const int64_t window = WindowNs();
    if (window == 0) return 0;
    const int64_t until = released_ns_ + window;
    return until > now_ns ? until : 0;
  }

  int64_t gap_ns() const { return gap_ns_; }

 private:
  int64_t released_ns_ = 0;  // the last release; 0: none yet
  bool awaiting_ = false;    // no arrival since that release
  int64_t gap_ns_ = kInitialGapNs;
};

}  // namespace pvdisk::io
