// RingCompanion: work that shares a FUSE uring queue's thread and io_uring.
//
// In the inline placement, the thread that owns FUSE queue q also drives
// pvdisk queue q of every disk: their backends queue image I/O on the FUSE
// queue's ring (borrowed through io::RingLender), and one io_uring_enter per
// round submits FUSE commits and image I/O together and waits for either.
// The channel calls the companion on the queue's thread only:
//   Attach() once, after the ring is set up and before any request;
//   Run() every round, after the completions of the round were handled and
//     before the thread enters the kernel;
//   PollUs() when Run() returned false and the thread is about to sleep;
//     PollHit() when the spin it allowed found work;
//   Detach() once, when every request has been answered, before the ring
//     is closed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "io/ring_lender.h"

namespace pvdisk::fuse::channel {

class RingCompanion {
 public:
  virtual ~RingCompanion() = default;
  // An error here fails the channel's Start() (nothing is served).
  virtual absl::Status Attach(io::RingLender* lender) = 0;
  // Does the work that is ready; never blocks. True when more is ready
  // (the thread then looks at its ring without sleeping, and comes back).
  virtual bool Run() = 0;
  // How long the thread may spin for completions of the companion's I/O
  // before it sleeps, in us (0: sleep at once). A spin ends at the first
  // completion of any kind on the ring.
  virtual uint32_t PollUs() { return 0; }
  virtual void PollHit() {}
  virtual void Detach() = 0;
};

// Makes the companion of FUSE queue `qid` (null: none), on that queue's
// thread.
using RingCompanionMaker =
    std::function<std::unique_ptr<RingCompanion>(uint32_t qid)>;

// The companions of a channel's queues: how each is made (empty: none), and
// the submission room they need on a queue's ring per round.
struct RingCompanions {
  RingCompanionMaker make;
  uint32_t sq_entries = 0;
};

}  // namespace pvdisk::fuse::channel
