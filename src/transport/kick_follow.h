// Where a backend thread runs (the backend-thread placement): on the CPU
// its kicks come from while requests come one at a time, anywhere at depth.
//
// A request served by a backend thread crosses threads twice: the FUSE
// queue thread that pushed it kicks the backend, and the backend, once the
// I/O completed, wakes the FUSE queue thread to commit the reply. With the
// backend on another CPU both are wake-ups across CPUs, and on a virtual
// machine whose idle vCPUs halt each costs 45-60 us (a local one 3-5 us).
// The kicking thread runs on its caller's CPU (the kernel queues a FUSE
// request on its sender's CPU, and --fuse-queue-pin auto keeps the queue's
// thread there while requests come one at a time), so a backend on that
// CPU makes both hand-offs local: at iodepth 1 the caller, the FUSE thread
// and the backend take turns on one CPU, as the inline placement's one
// thread does. At depth the backend is let go again: then it should run
// beside the threads that feed it, not take turns with them.
//
// KickFollow is the decision (pure); BackendAffinity applies it to the
// calling thread.
#pragma once

#include <sched.h>

#include <cstdint>

namespace pvdisk::transport {

class KickFollow {
 public:
  // Kicks in a row from one CPU before the backend moves there: a caller
  // that moves between CPUs, or two callers taking turns, leave it where
  // it is (and two callers at once are depth: anywhere).
  static constexpr unsigned kStreak = 8;
  static constexpr int kAnyCpu = -1;

  // Once per backend round. `one_at_a_time`: requests come one at a time
  // (the backend's measure of depth, as for its poll). `kick_cpu`: the CPU
  // the latest kick since the previous round came from, or kAnyCpu when no
  // kick came (or its CPU is unknown). True when cpu() changed.
  bool Round(bool one_at_a_time, int kick_cpu);
  // The CPU the backend should run on, or kAnyCpu (any it is allowed).
  int cpu() const { return cpu_; }

 private:
  int cpu_ = kAnyCpu;
  int candidate_ = kAnyCpu;  // the CPU of the current streak of kicks
  unsigned streak_ = 0;
};

// Applies KickFollow's decision to the calling thread. Made on that thread;
// the CPUs it may use are those it was allowed when made (a daemon started
// under `taskset` stays within them). A CPU outside them is not followed.
class BackendAffinity {
 public:
  BackendAffinity();
  // Moves the calling thread to `cpu`, or back to every allowed CPU for
  // KickFollow::kAnyCpu. A failure leaves it where it was: slower, never
  // wrong.
  void Apply(int cpu);

 private:
  cpu_set_t allowed_;
  bool known_ = false;  // allowed_ was read
};

}  // namespace pvdisk::transport
