// RingTimer: a wake-up at a given time for the thread that owns a lent
// io_uring (io/ring_lender.h). It queues an IORING_OP_TIMEOUT with an
// absolute CLOCK_MONOTONIC time on the shared ring; the owner's next
// io_uring_enter submits it with its own entries, and its completion ends
// the owner's wait, after which the owner runs its round. So a borrower
// whose owner does the sleeping (the delay model in the inline placement)
// is run again by a time of its choosing, for one SQE per wake-up and no
// system call or descriptor of its own.
//
// Owner thread only, like the ring.
#pragma once

#include <linux/time_types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "io/ring_lender.h"

namespace pvdisk::io {

class RingTimer final : public CqeSink {
 public:
  // Lends itself on `lender`'s ring, which must outlive it.
  explicit RingTimer(RingLender* lender);
  // Unlends. A timeout still queued completes later into nothing (the
  // owner drops CQEs of tags no longer lent); its time, which the kernel
  // reads when the owner submits it, is left allocated for that.
  ~RingTimer() override;
  RingTimer(const RingTimer&) = delete;
  RingTimer& operator=(const RingTimer&) = delete;

  // Makes the owner's wait end by `deadline_ns` (CLOCK_MONOTONIC): queues a
  // timeout for it unless one already queued fires by then. False when the
  // ring has no free entry even after submitting (ask again next round).
  bool WakeBy(int64_t deadline_ns);

  // How late, in ns, the owner handled the last timeout that fired since
  // the previous call (the wake-up lateness of its sleep); -1 if none fired
  // or the one that fired was queued for a time already past (it ended no
  // sleep at its time, so its lateness tells nothing of wake-ups).
  int64_t TakeLateness();
  // Whether any timeout completed since the previous call (at its time, for
  // a time already past, or cancelled): the owner's round runs because of it.
  bool TakeFired();

  void OnCqe(uint64_t user_data, int32_t res) override;

 private:
  // One queued timeout. Heap-allocated one by one: the kernel reads `time`
  // when the owner submits, so it must not move.
  struct Pending {
    __kernel_timespec time{};
    int64_t deadline_ns = 0;
    bool queued = false;
    bool past = false;  // queued for a time already past
  };

  RingLender* const lender_;
  const uint64_t tag_;
  std::vector<std::unique_ptr<Pending>> pending_;  // by user_data index
  int64_t lateness_ns_ = -1;
  bool fired_ = false;
};

}  // namespace pvdisk::io
