#include "io/ring_timer.h"

#include <liburing.h>

#include <cerrno>

#include "io/deadline.h"

namespace pvdisk::io {

RingTimer::RingTimer(RingLender* lender)
    : lender_(lender), tag_(lender->Lend(this)) {}

RingTimer::~RingTimer() {
  lender_->Unlend(tag_);
  for (auto& pending : pending_) {
    if (pending->queued) static_cast<void>(pending.release());
  }
}

bool RingTimer::WakeBy(int64_t deadline_ns) {
  Pending* free_one = nullptr;
  size_t free_index = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& pending = *pending_[i];
    if (!pending.queued) {
      if (free_one == nullptr) {
        free_one = &pending;
        free_index = i;
      }
    } else if (pending.deadline_ns <= deadline_ns) {
      return true;  // that one wakes the owner in time
    }
  }
  io_uring* ring = lender_->ring();
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe == nullptr) {
    io_uring_submit(ring);
    sqe = io_uring_get_sqe(ring);
    if (sqe == nullptr) return false;
  }
  if (free_one == nullptr) {
    free_index = pending_.size();
    pending_.push_back(std::make_unique<Pending>());
    free_one = pending_.back().get();
  }
  free_one->deadline_ns = deadline_ns;
  free_one->past = deadline_ns <= MonotonicNowNs();
  free_one->time.tv_sec = deadline_ns / kNanosPerSecond;
  free_one->time.tv_nsec = deadline_ns % kNanosPerSecond;
  free_one->queued = true;
  // Count 0: a pure timer, ended only by its time. Absolute, on the
  // monotonic clock, so that a late submission does not move it.
  io_uring_prep_timeout(sqe, &free_one->time, 0, IORING_TIMEOUT_ABS);
  io_uring_sqe_set_data64(sqe, tag_ | free_index);
  return true;
}

int64_t RingTimer::TakeLateness() {
  const int64_t lateness = lateness_ns_;
  lateness_ns_ = -1;
  return lateness;
}

bool RingTimer::TakeFired() {
  const bool fired = fired_;
  fired_ = false;
  return fired;
}

void RingTimer::OnCqe(uint64_t user_data, int32_t res) {
  const uint64_t index = user_data & RingLender::kSinkMask;
  if (index >= pending_.size()) return;
  Pending& pending = *pending_[index];
  pending.queued = false;
  fired_ = true;
  // -ETIME: it fired. Anything else (cancelled with the ring) wakes the
  // owner all the same, but says nothing about lateness.
  if (res == -ETIME && !pending.past) {
    lateness_ns_ = MonotonicNowNs() - pending.deadline_ns;
  }
}

}  // namespace pvdisk::io
