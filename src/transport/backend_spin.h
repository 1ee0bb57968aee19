// Whether a backend thread spins (--poll-us) before it sleeps: the
// decision as a pure function, so that every input's part in it is tested
// on its own (tests/transport/backend_spin_test.cc).
//
// Spinning pays when requests come one at a time: a wake-up (for the lone
// I/O's completion, then for the kick of the next request) is much of each
// request's latency, and the CPU spun on would be idle. At depth the
// engine's completions keep the backend busy anyway, and spinning only
// takes a CPU from the threads that feed it (polling before every sleep
// cost sr128k_qd8 a quarter of its throughput, measured 2026-11-30).
//
// A spin also waits for the completion of what is in flight, so it asks
// the engine whether that completion can come while the thread spins
// (io::IoEngine::completes_while_spinning): not for an rbd request
// (librbd's threads do the work the spin keeps off the CPU) nor for the
// uring engine's flushes (io/spin_policy.h). Then the thread sleeps at
// once, as the inline placement's driver does (BackendLoop::DrivenPollUs).
#pragma once

#include <cstdint>

namespace pvdisk::transport {

struct BackendSpinInputs {
  uint32_t poll_us = 0;        // --poll-us; 0 = never spin
  bool one_at_a_time = false;  // the engine's depth says so (BackendLoop)
  // The backend runs on the CPU its kicks come from (kick_follow.h): the
  // next request's sender needs that CPU, so only a completion already on
  // its way is worth a spin there.
  bool on_kicker_cpu = false;
  uint32_t inflight = 0;  // I/Os the engine holds
  // The engine's completes_while_spinning(): whether what is in flight can
  // complete while this thread spins on its CPU.
  bool completes_while_spinning = true;
};

constexpr bool BackendShouldSpin(const BackendSpinInputs& in) {
  if (in.poll_us == 0 || !in.one_at_a_time) return false;
  // Something in flight that cannot complete while we spin: the spin would
  // only hold it back.
  if (in.inflight > 0 && !in.completes_while_spinning) return false;
  // On the kicker's CPU: never for the next request.
  if (in.on_kicker_cpu) return in.inflight > 0;
  // Elsewhere: for the next request or the completion on its way.
  return true;
}

}  // namespace pvdisk::transport
