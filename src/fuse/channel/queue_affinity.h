// Where a FUSE uring queue's thread runs (pvdisk mount's --fuse-queue-pin).
//
// The kernel sends a request to the queue of the CPU its caller runs on, so
// queue q's callers are on CPU q. Its thread can run there too (on), where
// the scheduler puts it (off), or follow how the requests come (auto):
//   - one at a time (never two in the server at once): on CPU q. The
//     caller sleeps while its request is served; a queue thread on the
//     caller's CPU, which
//     spins for a lone completion (--poll-us), keeps that CPU awake for the
//     caller's wake-up. Measured at fio iodepth 1, 4 KiB random reads: on a
//     virtio disk 0.56-0.60 of native on CPU q against 0.44-0.49 elsewhere,
//     on a loop device 0.52-0.54 against 0.43-0.46.
//   - several at once: on the other CPUs. The caller keeps submitting while
//     the thread serves, and two CPUs work instead of one taking turns. At
//     iodepth 32: the null engine 1.5x (as fast as the classic FUSE floor),
//     a loop device 1.3-1.5x, the virtio disk within its noise (one job) and
//     1.1x (two jobs). Left to the scheduler instead, the thread is often
//     woken onto its caller's CPU (the null engine gave 200K or 384K IOPS,
//     run to run). Measured 2026-12-02:
//     docs/perf/compare-2026-12-02-queue-pin-*.md.
#pragma once

#include <sched.h>

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace pvdisk::fuse::channel {

enum class QueuePin { kAuto, kOn, kOff };

absl::StatusOr<QueuePin> ParseQueuePin(std::string_view text);
std::string_view QueuePinName(QueuePin pin);

// The auto policy's decision, from how many requests the server held at
// once. Windows of kWindow rounds that took a request decide: a window is
// deep when at least kDeepRounds of its rounds held `deep_at` or more at
// once (kDeepAtOnce, two, unless the channel's options say otherwise:
// under a delay model requests stay held for the delay, and what is held
// at once is the caller's iodepth, not how busy the thread is; see
// fuse::AutoPinDeepAt).
// One deep window moves the thread off its CPU; kCalmWindows windows in a
// row that are not deep bring it back (a caller at iodepth 1 is back on
// its CPU after 2048 requests).
//
// A few rounds of two do not make a window deep: a caller at iodepth 1 now
// and then has a request beside its I/O (around the start and end of a fio
// run; which requests was not traced), and counted as depth they moved the
// thread off again. After a deep fio run from CPU 0 and then eight 2 MiB
// fio runs at iodepth 1, queue 0's thread was on CPUs 1,1,0,1,1,1,0,0
// after them under the old rule (in 6 trials it came back and left again
// in 5, and never came back in 1), and on 1,1,0,0,0,0,0,0 under this one
// (3 trials alike).
//
// The way back is slower as a precaution, not a measured need: a thread
// off its CPU serves a deep caller faster and could then find requests one
// by one for a window (with the null engine, whose requests never wait in
// the server, a first version with one 256-round window each way once gave
// 245K IOPS where the other runs gave 410K; that cause is not proven).
// Short windows let a short deep run move the thread at all. Pure: the
// caller applies it.
class AutoPin {
 public:
  static constexpr unsigned kWindow = 64;
  static constexpr unsigned kCalmWindows = 32;
  static constexpr unsigned kDeepRounds = 4;
  static constexpr unsigned kDeepAtOnce = 2;

  explicit AutoPin(unsigned deep_at = kDeepAtOnce) : deep_at_(deep_at) {}

  // `at_once`: the most FUSE requests the server held (taken, not yet
  // committed) right after taking one in this round; 0 for a round that
  // took none (ignored). True when the decision changed (on_own_cpu()).
  bool Round(unsigned at_once);
  bool on_own_cpu() const { return on_own_cpu_; }

 private:
  const unsigned deep_at_;
  bool on_own_cpu_ = true;
  unsigned rounds_ = 0;
  unsigned deep_rounds_ = 0;   // in this window, rounds that held deep_at_+
  unsigned calm_windows_ = 0;  // in a row, while off the CPU
};

// Applies a QueuePin to the calling thread, the one that owns queue `cpu`.
// Made on that thread; the CPUs it may use are those the thread was allowed
// when made (so a daemon started under `taskset` stays within them). A CPU
// set that would be empty (q not allowed, or q the only CPU allowed) leaves
// the thread where it may run already.
class QueueAffinity {
 public:
  // `deep_at`: AutoPin's.
  QueueAffinity(QueuePin pin, uint32_t cpu,
                unsigned deep_at = AutoPin::kDeepAtOnce);
  // Once per round, with AutoPin::Round's `at_once` (auto may move the
  // thread).
  void Round(unsigned at_once) {
    if (pin_ == QueuePin::kAuto && policy_.Round(at_once)) Apply();
  }

 private:
  void Apply();

  const QueuePin pin_;
  AutoPin policy_;
  cpu_set_t own_;     // {cpu} within the allowed CPUs (may be empty)
  cpu_set_t others_;  // the allowed CPUs but `cpu` (may be empty)
};

}  // namespace pvdisk::fuse::channel
