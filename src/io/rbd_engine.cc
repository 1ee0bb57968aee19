#include "io/rbd_engine.h"

#include <liburing.h>
#include <poll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "io/completion_mailbox.h"
#include "io/deadline.h"
#include "io/request_check.h"
#include "io/ring_lender.h"

namespace pvdisk::io {
namespace {

class RbdEngine;

// What became of a request in librbd's hands (Pending::state).
enum PendingState : int {
  kInFlight,
  kCompleted,  // librbd finished it: its result is on the way to the owner
  kAbandoned,  // answered with EIO by the owner; librbd still holds it
};

// One request in librbd's hands: the completion's argument. Belongs to the
// engine that submitted it until librbd's completion callback hands it
// back (OnLibrbdDone); once abandoned (see RbdEngine::Expire) it belongs to
// nobody, and the callback deletes it.
struct Pending {
  RbdEngine* owner = nullptr;
  uint64_t tag = 0;
  uint64_t length = 0;
  IoOp op = IoOp::kRead;
  int64_t result = 0;  // set by the callback, before the hand-back
  uint64_t seq = 0;    // which submission through this slot
  int64_t deadline_ns = 0;
  size_t index = 0;  // in the owner's slots_
  // kInFlight until either librbd's callback (on librbd's thread) moves it
  // to kCompleted or the owner's Expire to kAbandoned: whichever moves it
  // first decides, the other sees the move and backs off.
  std::atomic<int> state{kInFlight};
};

// librbd's result as the engine contract wants it: the request's length, or
// -EIO for anything the cluster reported (a timeout, a lost connection, an
// OSD error) and for a short read.
int64_t Normalize(const Pending& pending, ssize_t ret) {
  if (ret < 0) return -EIO;
  if (pending.op == IoOp::kRead && static_cast<uint64_t>(ret) != pending.length)
    return -EIO;
  return static_cast<int64_t>(pending.length);
}

// How completions come back: librbd calls OnLibrbdDone on one of its own
// threads for each finished request, which puts the request into its
// engine's mailbox and, unless the mailbox was already signalled since
// the engine last emptied it, writes the mailbox's eventfd. So a
// completion wakes only the thread of the engine that submitted it, at
// most once per batch, and no engine drains another's completions. (An
// eventfd per image, rbd_set_image_notification, woke every engine's
// thread for every completion, and whichever drained them relayed the
// others' through their mailboxes: a second wake-up.)
//
// Two ways to wait. With a ring of its own thread (the backend-thread
// placement) Run(wait) sleeps in poll() on the mailbox, the expiry timer
// and the watched wake fds. On a borrowed ring (the inline placement, see
// ring_lender.h) it never sleeps: it keeps one POLL_ADD armed on the ring
// for each of its two descriptors, so that a completion (or the timer)
// wakes the owner thread's io_uring_enter, and Run(false) collects.
//
// Spinning: a thread that spins for an rbd completion (--poll-us) never
// sees it come. A request's round trip (librbd's threads, the messenger,
// the OSD; 0.2 ms and more even on one machine) is longer than any spin,
// and the threads it needs are the ones the spin keeps off the CPU (on
// this project's 2-vCPU machine the spin never hit: polls_hit 0 at
// iodepth 1). So completes_while_spinning() is false: callers sleep at
// once (io/spin_policy.h).
//
// Requests the cluster holds past the timeout: librados fails each
// operation rados_osd_op_timeout after librbd sent it, but librbd may hold
// a write back before it sends it: with the object-map feature, writes to
// objects not yet written wait for the object map's update, and those
// updates go out one after another, each failing only after its own
// timeout, so on a cluster that takes no writes (full, paused) the last of
// a batch of such writes failed after several timeouts. The engine
// therefore answers every write, discard, write-zeroes and flush that
// librbd has not finished one timeout plus kExpiryGraceNs after it was
// queued with EIO itself (Expire), and leaves the request to librbd, which
// owns it from then on: librbd copied the write's data when it took it
// (rbd_disable_zero_copy_writes), so the caller's buffers are free again.
// Such a write may still reach the image later, once the cluster takes
// writes again, as a write that failed on a real disk may or may not have
// reached the medium; librbd's callback then deletes the request. Reads are not
// abandoned: librbd fills the caller's buffers when it finishes them, and
// nothing holds a read back, so librados' own timeout fails them in time.
class RbdEngine final : public IoEngine, public CqeSink {
 public:
  // Past its timeout, librados gets this long to fail a request itself.
  static constexpr int64_t kExpiryGraceNs = kNanosPerSecond;

  RbdEngine(RbdImage& image, uint32_t depth, RingLender* lender)
      : image_(image),
        mode_("librbd-async"),
        lender_(lender),
        expiry_ns_(int64_t{image.spec().timeout_seconds} * kNanosPerSecond +
                   kExpiryGraceNs) {
    slots_.reserve(depth);
    free_.reserve(depth);
    for (uint32_t i = 0; i < depth; ++i) {
      slots_.push_back(std::make_unique<Pending>());
      slots_.back()->index = i;
      free_.push_back(slots_.back().get());
    }
  }

  // Waits for every request in flight (bounded by the cluster timeout: an
  // unanswered one fails then): their completions point at this engine.
  ~RbdEngine() override {
    std::vector<IoCompletion> ignored;
    while (inflight_ > 0) {
      // Polls the mailbox and the timer only: a wake-up of the watched fds
      // is left for the engine that replaces this one.
      if (Poll(/*wait=*/true, kEventFds, ignored) < 0) {
        LogInfo("rbd engine: %u requests still in flight at teardown",
                inflight_);
        break;
      }
      ignored.clear();
    }
    // Polls still armed on the ring complete after this: their CQEs find
    // the tag unlent and are dropped by the ring's owner.
    if (lender_ != nullptr) lender_->Unlend(lend_tag_);
    if (timer_fd_ >= 0) close(timer_fd_);
  }

  absl::Status Init() {
    PVDISK_RETURN_IF_ERROR(mailbox_.Init());
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) {
      return absl::InternalError(
          absl::StrCat("timerfd_create: ", strerror(errno)));
    }
    fds_.push_back({mailbox_.fd(), POLLIN, 0});
    fds_.push_back({timer_fd_, POLLIN, 0});
    if (lender_ != nullptr) {
      lend_tag_ = lender_->Lend(this);
      ArmPolls();
    }
    return absl::OkStatus();
  }

  // One of the armed polls fired (or was cancelled with the ring).
  void OnCqe(uint64_t user_data, int32_t res) override {
    (void)res;  // fired or not, the next Run() looks and re-arms
    const uint64_t index = user_data & RingLender::kSinkMask;
    if (index < kEventFds) {
      armed_[index] = false;
      fired_[index] = true;
    }
  }

  // librbd's completion callback, on one of librbd's threads (or, for a
  // request librbd fails at once, within the rbd_aio_* call).
  static void OnLibrbdDone(rbd_completion_t completion, void* arg) {
    auto* pending = static_cast<Pending*>(arg);
    const ssize_t ret = rbd_aio_get_return_value(completion);
    rbd_aio_release(completion);
    int expected = kInFlight;
    if (!pending->state.compare_exchange_strong(expected, kCompleted,
                                                std::memory_order_acq_rel)) {
      delete pending;  // abandoned: answered already, nobody's
      return;
    }
    // The owner is alive: it waits at teardown until it has taken back
    // every request it did not abandon.
    pending->result = Normalize(*pending, ret);
    pending->owner->Deliver(pending);
  }

  // Whether a spin could see a completion come: never (see above).
  bool completes_while_spinning() const override { return false; }

  std::string_view name() const override { return "rbd"; }
  std::string_view mode() const override { return mode_; }
  uint32_t inflight() const override { return inflight_; }

  absl::Status WatchWakeFd(int fd, uint64_t tag) override {
    fds_.push_back({fd, POLLIN, 0});
    wake_tags_.push_back(tag);
    return absl::OkStatus();
  }

  int Queue(const IoRequest& request) override {
    // One "file": the RBD image itself.
    const uint64_t image_bytes = image_.size_bytes();
    if (int bad = CheckRequest(request, &image_bytes, 1); bad != 0) {
      return bad;
    }
    if (free_.empty()) return -EBUSY;
    Pending* pending = free_.back();
    const int64_t deadline_ns = MonotonicNowNs() + expiry_ns_;
    const uint64_t seq = ++last_seq_;
    pending->owner = this;
    pending->tag = request.tag;
    pending->length = request.length;
    pending->op = request.op;
    pending->result = 0;
    pending->seq = seq;
    pending->deadline_ns = deadline_ns;
    // No other thread sees the slot before librbd finishes this request.
    pending->state.store(kInFlight, std::memory_order_relaxed);
    rbd_completion_t completion;
    int ret = rbd_aio_create_completion(pending, &RbdEngine::OnLibrbdDone,
                                        &completion);
    if (ret < 0) return -EIO;
    ret = Submit(request, completion);
    if (ret < 0) {
      rbd_aio_release(completion);
      return ret == -EINVAL ? -EINVAL : -EIO;
    }
    free_.pop_back();
    ++inflight_;
    if (request.op != IoOp::kRead) expiring_.push_back({pending, seq});
    return 0;
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    if (lender_ != nullptr) return RunBorrowed(out);
    return Poll(wait, fds_.size(), out);
  }
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    if (lender_ != nullptr) return RunBorrowed(out);
    return Poll(/*wait=*/true, fds_.size(), out, deadline_ns);
  }

 private:
  // fds_[0] the mailbox, [1] the expiry timer.
  static constexpr size_t kEventFds = 2;
  static constexpr size_t kTimerFd = 1;

  // A request in expiring_: `seq` tells whether the slot still holds it.
  struct Expiring {
    Pending* pending;
    uint64_t seq;
  };

  // Run() on a borrowed ring: never blocks, never fails. Clears the
  // counter of each descriptor whose poll fired (only those: a read is a
  // system call), then looks into the mailbox (one atomic load when it is
  // empty) and the expiry deadlines.
  int RunBorrowed(std::vector<IoCompletion>& out) {
    const size_t before = out.size();
    // Cleared before looking, as in Poll(): a completion delivered after
    // the mailbox is emptied signals again, and the re-armed poll sees it.
    uint64_t counter;
    for (size_t i = 0; i < kEventFds; ++i) {
      if (!fired_[i]) continue;
      fired_[i] = false;
      if (read(fds_[i].fd, &counter, sizeof(counter)) == sizeof(counter) &&
          i == kTimerFd) {
        timer_set_ = false;
      }
    }
    Collect(out);
    ArmPolls();
    return static_cast<int>(out.size() - before);
  }

  // Queues a POLL_ADD on each eventfd that has none armed; the owner's next
  // io_uring_enter submits them. With the submission queue full even after
  // submitting, the rest wait for the next round, as the driver's own kick
  // reads do.
  void ArmPolls() {
    io_uring* ring = lender_->ring();
    for (size_t i = 0; i < kEventFds; ++i) {
      if (armed_[i]) continue;
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) {
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
        if (sqe == nullptr) return;
      }
      io_uring_prep_poll_add(sqe, fds_[i].fd, POLLIN);
      io_uring_sqe_set_data64(sqe, lend_tag_ | i);
      armed_[i] = true;
    }
  }

  // Run() over the first `watch_count` entries of fds_; a wait ends at
  // `deadline_ns` (kNoDeadline: none).
  int Poll(bool wait, size_t watch_count, std::vector<IoCompletion>& out,
           int64_t deadline_ns = kNoDeadline) {
    const size_t before = out.size();
    Collect(out);
    const bool block = wait && out.size() == before;
    int ready;
    for (;;) {
      timespec left = TimeLeft(block ? deadline_ns : 0);
      ready =
          ppoll(fds_.data(), watch_count,
                block && deadline_ns == kNoDeadline ? nullptr : &left, nullptr);
      if (ready >= 0) break;
      if (errno != EINTR) return -errno;
    }
    if (ready > 0) {
      uint64_t counter;
      // The mailbox's counter only says "look": clear it, then look (a
      // completion delivered after the mailbox is emptied signals again).
      for (size_t i = 0; i < kEventFds; ++i) {
        if (fds_[i].revents != 0 &&
            read(fds_[i].fd, &counter, sizeof(counter)) == sizeof(counter) &&
            i == kTimerFd) {
          timer_set_ = false;
        }
      }
      for (size_t i = kEventFds; i < watch_count; ++i) {
        if (fds_[i].revents != 0 &&
            read(fds_[i].fd, &counter, sizeof(counter)) == sizeof(counter)) {
          out.push_back({wake_tags_[i - kEventFds], 0, /*wake=*/true});
        }
      }
      Collect(out);
    }
    return static_cast<int>(out.size() - before);
  }

  int Submit(const IoRequest& request, rbd_completion_t completion) {
    rbd_image_t image = image_.handle();
    switch (request.op) {
      case IoOp::kRead:
        return rbd_aio_readv(image, request.iov, request.iov_count,
                             request.offset, completion);
      case IoOp::kWrite:
        return rbd_aio_writev(image, request.iov, request.iov_count,
                              request.offset, completion);
      case IoOp::kFlush:
        return rbd_aio_flush(image, completion);
      case IoOp::kDiscard:
        return rbd_aio_discard(image, request.offset, request.length,
                               completion);
      case IoOp::kWriteZeroes:
        return rbd_aio_write_zeroes(image, request.offset, request.length,
                                    completion, /*zero_flags=*/0,
                                    /*op_flags=*/0);
    }
    return -EINVAL;
  }

  // What librbd handed back (the mailbox), then the expiry deadlines.
  void Collect(std::vector<IoCompletion>& out) {
    if (mailbox_.TakeAll(taken_)) {
      for (Pending* pending : taken_) Finish(pending, out);
      taken_.clear();
    }
    Expire(out);
  }

  // Answers with EIO every write, discard, write-zeroes and flush librbd
  // has held past its deadline (see the class comment), and sets the timer
  // for the next deadline. The abandoned request's slot goes to librbd (the
  // engine takes a new one), so the depth stays what it was.
  void Expire(std::vector<IoCompletion>& out) {
    if (expiring_.empty()) return;
    const int64_t now = MonotonicNowNs();
    while (!expiring_.empty()) {
      const Expiring front = expiring_.front();
      Pending* pending = front.pending;
      // Finished (the slot is free or holds a later request): drop it.
      if (pending->seq != front.seq || pending->owner != this) {
        expiring_.pop_front();
        continue;
      }
      if (pending->deadline_ns > now) break;
      // Read before the move: once abandoned, librbd's callback may delete
      // the request at any moment.
      const uint64_t tag = pending->tag;
      const size_t index = pending->index;
      int expected = kInFlight;
      if (!pending->state.compare_exchange_strong(expected, kAbandoned,
                                                  std::memory_order_acq_rel)) {
        // Completed, on its way through the mailbox: not ours to abandon.
        expiring_.pop_front();
        continue;
      }
      expiring_.pop_front();
      out.push_back({tag, -EIO, /*wake=*/false});
      --inflight_;
      (void)slots_[index].release();  // librbd's callback deletes it
      slots_[index] = std::make_unique<Pending>();
      slots_[index]->index = index;
      free_.push_back(slots_[index].get());
    }
    // The earliest deadline left; a timer set for an earlier one fires
    // early and comes back here.
    if (!expiring_.empty() && !timer_set_) {
      const int64_t at = expiring_.front().pending->deadline_ns;
      itimerspec when = {};
      when.it_value.tv_sec = static_cast<time_t>(at / kNanosPerSecond);
      when.it_value.tv_nsec = static_cast<long>(at % kNanosPerSecond);
      timer_set_ =
          timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &when, nullptr) == 0;
    }
  }

  // Called on librbd's thread with a completion of ours. The owner cannot
  // be destroyed meanwhile: its destructor waits until it has taken every
  // one of its requests back out of the mailbox.
  void Deliver(Pending* pending) { (void)mailbox_.Put(pending); }

  void Finish(Pending* pending, std::vector<IoCompletion>& out) {
    pending->owner = nullptr;  // no longer in expiring_'s sense in flight
    out.push_back({pending->tag, pending->result, /*wake=*/false});
    free_.push_back(pending);
    --inflight_;
  }

  RbdImage& image_;
  const std::string mode_;
  RingLender* const lender_;  // null: Run() polls on this thread
  uint64_t lend_tag_ = 0;
  bool armed_[kEventFds] = {false, false};
  bool fired_[kEventFds] = {false, false};
  // One per request the depth allows; an abandoned one is released to
  // librbd and replaced.
  std::vector<std::unique_ptr<Pending>> slots_;
  std::vector<Pending*> free_;  // slots not in flight
  uint32_t inflight_ = 0;
  // The timeout plus grace after which Expire() answers a held request.
  const int64_t expiry_ns_;
  // Requests Expire() may abandon, oldest first (all share one expiry, so
  // that is deadline order); finished ones are dropped as they reach the
  // front.
  std::deque<Expiring> expiring_;
  uint64_t last_seq_ = 0;
  int timer_fd_ = -1;
  bool timer_set_ = false;  // cleared when the timer fires
  // Polled by Run(): [0] the mailbox, [1] the timer, then the watched wake
  // fds (their tags in wake_tags_).
  std::vector<pollfd> fds_;
  std::vector<uint64_t> wake_tags_;
  CompletionMailbox<Pending*> mailbox_;  // what librbd handed back
  std::vector<Pending*> taken_;          // Collect's scratch
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoEngine>> CreateRbdEngine(
    const EngineOptions& options, RbdImage& image) {
  PVDISK_RETURN_IF_ERROR(
      CheckEngineOptions(options, image.size_sectors(), image.spec().Name()));
  // Room for the extra I/Os of a layer above it too.
  auto engine = std::make_unique<RbdEngine>(
      image, options.depth + options.extra_ios, options.ring_lender);
  PVDISK_RETURN_IF_ERROR(engine->Init());
  return WrapEngine(std::move(engine), options);
}

}  // namespace pvdisk::io
