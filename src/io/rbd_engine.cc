#include "io/rbd_engine.h"

#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "io/deadline.h"
#include "io/request_check.h"
#include "io/ring_lender.h"

namespace pvdisk::io {
namespace {

class RbdEngine;

// One request in librbd's hands: the completion's argument. Belongs to the
// engine that submitted it, whichever engine collects its completion.
struct Pending {
  RbdEngine* owner = nullptr;
  uint64_t tag = 0;
  uint64_t length = 0;
  IoOp op = IoOp::kRead;
  int64_t result = 0;  // set when collected
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

// Two ways to wait. With a ring of its own thread (the backend-thread
// placement) Run(wait) sleeps in poll() on the image's eventfd, the mailbox
// and the watched wake fds. On a borrowed ring (the inline placement, see
// ring_lender.h) it never sleeps: it keeps one POLL_ADD armed on the
// ring for each of its two eventfds, so that a completion wakes the
// owner thread's io_uring_enter, and Run(false) collects.
class RbdEngine final : public IoEngine, public CqeSink {
 public:
  RbdEngine(RbdImage& image, uint32_t depth, RingLender* lender)
      : image_(image), mode_("librbd-async"), lender_(lender), slots_(depth) {
    free_.reserve(depth);
    for (Pending& slot : slots_) free_.push_back(&slot);
  }

  // Waits for every request in flight (bounded by the cluster timeout: an
  // unanswered one fails then): their completions point at this engine.
  ~RbdEngine() override {
    std::vector<IoCompletion> ignored;
    while (inflight_ > 0) {
      // Polls the image and the mailbox only: a wake-up of the watched fds
      // is left for the engine that replaces this one.
      if (Poll(/*wait=*/true, /*watch_count=*/2, ignored) < 0) {
        LogInfo("rbd engine: %u requests still in flight at teardown",
                inflight_);
        break;
      }
      ignored.clear();
    }
    // Polls still armed on the ring complete after this: their CQEs find
    // the tag unlent and are dropped by the ring's owner.
    if (lender_ != nullptr) lender_->Unlend(lend_tag_);
    if (mailbox_fd_ >= 0) close(mailbox_fd_);
  }

  absl::Status Init() {
    mailbox_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mailbox_fd_ < 0) {
      return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
    }
    fds_.push_back({image_.event_fd(), POLLIN, 0});
    fds_.push_back({mailbox_fd_, POLLIN, 0});
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
    if (index < kEventFds) armed_[index] = false;
    fired_ = true;
  }

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
    *pending = Pending{this, request.tag, request.length, request.op, 0};
    rbd_completion_t completion;
    int ret = rbd_aio_create_completion(pending, nullptr, &completion);
    if (ret < 0) return -EIO;
    ret = Submit(request, completion);
    if (ret < 0) {
      rbd_aio_release(completion);
      return ret == -EINVAL ? -EINVAL : -EIO;
    }
    free_.pop_back();
    ++inflight_;
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
  static constexpr size_t kEventFds = 2;  // fds_[0] image, fds_[1] mailbox

  // Run() on a borrowed ring: never blocks, never fails. Looks into librbd
  // only after a poll fired: every completion librbd queues is followed by
  // a write to the image's eventfd (our poll fires), and every one another
  // engine drains for us by a write to our mailbox.
  int RunBorrowed(std::vector<IoCompletion>& out) {
    const size_t before = out.size();
    if (fired_) {
      fired_ = false;
      // Cleared before looking, as in Poll(): a completion signalled after
      // the read signals again, and the re-armed poll sees it.
      uint64_t counter;
      for (size_t i = 0; i < kEventFds; ++i) {
        (void)!read(fds_[i].fd, &counter, sizeof(counter));
      }
      Collect(out);
    }
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
      // The image's and the mailbox's counters only say "look": clear them,
      // then look (a completion signalled after this read signals again).
      for (size_t i = 0; i < 2; ++i) {
        if (fds_[i].revents != 0) {
          (void)!read(fds_[i].fd, &counter, sizeof(counter));
        }
      }
      for (size_t i = 2; i < watch_count; ++i) {
        if (fds_[i].revents != 0 &&
            read(fds_[i].fd, &counter, sizeof(counter)) == sizeof(counter)) {
          out.push_back({wake_tags_[i - 2], 0, /*wake=*/true});
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

  // Everything finished: this engine's own completions go to `out`, other
  // engines' to their mailboxes; then whatever others left in ours.
  void Collect(std::vector<IoCompletion>& out) {
    image_.DrainCompletions([&](rbd_completion_t completion) {
      auto* pending = static_cast<Pending*>(rbd_aio_get_arg(completion));
      pending->result =
          Normalize(*pending, rbd_aio_get_return_value(completion));
      rbd_aio_release(completion);
      if (pending->owner == this) {
        Finish(pending, out);
      } else {
        pending->owner->Deliver(pending);
      }
    });
    if (has_mail_.load(std::memory_order_acquire)) {
      std::vector<Pending*> mail;
      {
        std::lock_guard<std::mutex> lock(mailbox_mutex_);
        mail.swap(mailbox_);
        has_mail_.store(false, std::memory_order_relaxed);
      }
      for (Pending* pending : mail) Finish(pending, out);
    }
  }

  // Called from another engine's thread with a completion of ours. The
  // owner cannot be destroyed meanwhile: its destructor waits until it has
  // taken every one of its requests back, which needs this mutex.
  void Deliver(Pending* pending) {
    std::lock_guard<std::mutex> lock(mailbox_mutex_);
    mailbox_.push_back(pending);
    has_mail_.store(true, std::memory_order_release);
    uint64_t one = 1;
    (void)!write(mailbox_fd_, &one, sizeof(one));
  }

  void Finish(Pending* pending, std::vector<IoCompletion>& out) {
    out.push_back({pending->tag, pending->result, /*wake=*/false});
    free_.push_back(pending);
    --inflight_;
  }

  RbdImage& image_;
  const std::string mode_;
  RingLender* const lender_;  // null: Run() polls on this thread
  uint64_t lend_tag_ = 0;
  bool armed_[kEventFds] = {false, false};
  bool fired_ = false;
  std::vector<Pending> slots_;  // one per request the depth allows
  std::vector<Pending*> free_;  // slots not in flight
  uint32_t inflight_ = 0;
  // Polled by Run(): [0] the image's eventfd, [1] the mailbox, then the
  // watched wake fds (their tags in wake_tags_).
  std::vector<pollfd> fds_;
  std::vector<uint64_t> wake_tags_;
  int mailbox_fd_ = -1;
  std::mutex mailbox_mutex_;
  std::vector<Pending*> mailbox_;
  std::atomic<bool> has_mail_{false};
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
