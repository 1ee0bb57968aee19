// Device latency model: an engine decorator that holds every completion
// until a fixed time after its request was queued, like the kernel's
// null_blk with completion_nsec. `--disk IMG,delay=US[,delay-write=US]`
// turns it on over any engine; on the null engine it models a remote disk
// (a network store) whose cost is latency, on any machine.
//
// No thread, timer or descriptor of its own: held completions wait in a
// heap ordered by due time, and the earliest due time is an event of the
// loop that runs the engine. A backend that sleeps in the engine (the
// backend-thread placement, --backend process) sleeps in the inner
// engine's RunUntil() with that time as its deadline (ppoll's timeout, or
// the io_uring wait's); where the thread that drives the engine owns the
// ring and does the sleeping (the inline placement, io/ring_lender.h), a
// timeout queued on that ring (io/ring_timer.h) ends its wait.
#pragma once

#include <cstdint>
#include <memory>

#include "io/io_engine.h"
#include "io/ring_lender.h"

namespace pvdisk::io {

// Microseconds from Queue() to the earliest Run() that may return the
// request's completion. kWrite requests use `write_us`, all others `us`.
// A request the inner engine takes longer than that completes when the
// inner engine says (the delay is a floor, not an addition).
struct CompletionDelay {
  uint32_t us = 0;
  uint32_t write_us = 0;
};

// The longest delay accepted: a backend that stops waits for held requests,
// so a delay is also how long an unmount may wait for the last of them.
inline constexpr uint32_t kMaxDelayUs = 10'000'000;

// Wraps `inner` (made for `depth` requests in flight). Held completions are
// returned in due order, requests with the same due time in queue order,
// never before their due time; those due within ~3% of the delay of one
// another come back together, at the latest of their due times (so that
// the thread that answers them takes them in one round);
// results, errors included, pass through unchanged; a request `inner`
// refuses is refused at once. inflight() counts held completions, so an
// engine cap (--engine-max-inflight) holds them against the cap as a real
// device's latency would. name() is inner's; mode() adds the delay.
// Destroying the engine drops held completions (their I/O is already done;
// the backend answers what it held itself) and does not wait for due times.
// `lender`: the ring of the thread that drives the engine, when that thread
// sleeps on it rather than in the engine's Run (else null).
std::unique_ptr<IoEngine> WrapWithDelay(std::unique_ptr<IoEngine> inner,
                                        CompletionDelay delay, uint32_t depth,
                                        RingLender* lender);

}  // namespace pvdisk::io
