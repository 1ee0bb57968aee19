#include "io/uring_engine.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "io/deadline.h"
#include "io/flush_policy.h"
#include "io/iov_cursor.h"
#include "io/request_check.h"
#include "io/ring_lender.h"
#include "io/spin_policy.h"

namespace pvdisk::io {
namespace {

// user_data layout: an I/O carries its slot index; a wake-fd read carries
// kWakeBit | its watch index; requests the engine makes for itself (cancels,
// and liburing's internal timeouts, which use all ones) carry kInternalBit.
constexpr uint64_t kWakeBit = uint64_t{1} << 62;
constexpr uint64_t kInternalBit = uint64_t{1} << 63;

constexpr unsigned kMinEntries = 8;
constexpr unsigned kMaxEntries = 32768;
// Submission slots beyond depth + extra I/Os, for wake-fd reads and
// resubmissions.
constexpr unsigned kSpareEntries = 16;
// One read or write SQE moves at most this much (the kernel's own cap is
// about the same); longer single-buffer requests continue as short transfers.
constexpr uint64_t kMaxSingleTransfer = 0x7ffff000;

constexpr int kPunchHole = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
constexpr int kZeroRange = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;

// Setup flags to try, best first. DEFER_TASKRUN runs completion work only
// when this thread asks for completions (fewer interrupts, better batching);
// it needs SINGLE_ISSUER. TASKRUN_FLAG makes the kernel raise
// IORING_SQ_TASKRUN when such work is waiting, so liburing knows to enter the
// kernel in a non-blocking Run(). Older kernels reject unknown flags with
// EINVAL, and the next set is tried.
constexpr unsigned kSetupFlagSets[] = {
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
        IORING_SETUP_TASKRUN_FLAG,
    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
    0,
};

// One request in flight. Slots live in a vector sized once, so the addresses
// handed to the kernel (the cursor's iovecs) stay put.
struct Slot {
  IoOp op = IoOp::kRead;
  uint64_t tag = 0;
  uint64_t offset = 0;         // of the whole request
  uint64_t length = 0;         // of the whole request
  uint64_t done = 0;           // bytes transferred so far (kRead/kWrite)
  const iovec* iov = nullptr;  // the caller's array
  int iov_count = 0;
  bool use_cursor = false;  // after a short transfer: submit from `cursor`
  IovCursor cursor;
  int fallocate_mode = 0;
  int buffer_index = -1;  // registered buffer holding iov[0], or -1
  uint16_t file = 0;      // IoRequest::file
};

// An eventfd read kept armed. Heap-allocated one by one: the kernel writes
// `counter` while the read is in flight, so it must never move.
struct WakeWatch {
  int fd = -1;
  uint64_t tag = 0;
  uint64_t counter = 0;
  bool armed = false;   // a read SQE for it is queued or in flight
  bool broken = false;  // its read failed: no longer watched
};

unsigned RingEntries(uint32_t capacity) {
  const uint64_t want = uint64_t{capacity} + kSpareEntries;
  return static_cast<unsigned>(
      std::bit_ceil(std::clamp<uint64_t>(want, kMinEntries, kMaxEntries)));
}

class UringEngine final : public IoEngine, public CqeSink {
 public:
  // `capacity`: the most requests in flight (depth plus extra I/Os).
  // `lender`: null for a ring of the engine's own, else the ring to borrow.
  UringEngine(const EngineFiles& files, uint32_t capacity, RingLender* lender)
      : file_bytes_(FileSizes(files)),
        mode_(files[0]->direct_note()),
        capacity_(capacity),
        lender_(lender),
        slots_(capacity) {
    fds_.reserve(files.size());
    for (const ImageFile* file : files) fds_.push_back(file->fd());
    free_slots_.reserve(capacity);
    for (uint32_t i = capacity; i > 0; --i) free_slots_.push_back(i - 1);
  }

  ~UringEngine() override;

  std::string_view name() const override { return "uring"; }
  std::string_view mode() const override { return mode_; }

  int Queue(const IoRequest& request) override;
  absl::Status WatchWakeFd(int fd, uint64_t tag) override;
  int Run(bool wait, std::vector<IoCompletion>& out) override {
    return RunWith(wait, kNoDeadline, out);
  }
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    return RunWith(/*wait=*/true, deadline_ns, out);
  }
  uint32_t inflight() const override { return inflight_; }
  bool completes_while_spinning() const override {
    return worker_inflight_ == 0;
  }
  void OfferBuffers(std::vector<iovec> buffers) override {
    offered_buffers_ = std::move(buffers);
  }
  bool uses_fixed_buffers() const override {
    return fixed_buffers_.load(std::memory_order_relaxed);
  }
  // A borrowed ring's completion, handed over by its owner.
  void OnCqe(uint64_t user_data, int32_t res) override {
    OnIoCqe(static_cast<uint32_t>(user_data & RingLender::kSinkMask), res,
            lent_completions_);
  }
  // On a borrowed ring: the I/O its owner would hold up by blocking.
  uint32_t InFlight() const override { return inflight_; }

 private:
  bool borrowed() const { return lender_ != nullptr; }
  // Sets up the ring on first use. Returns 0 or a negative errno (remembered:
  // later calls fail the same way).
  int EnsureRing();
  // An SQE, submitting what is queued to make room if the SQ is full; null if
  // even that did not free one.
  io_uring_sqe* GetSqe();
  // The fixed buffer index for a single-buffer read or write of `bytes` at
  // `data`: the offered buffer the request named, else one the lender has
  // for that memory; -1 for an ordinary one.
  int FixedIndex(const Slot& slot, const void* data, size_t bytes);
  // Queues the (rest of the) request in slot `index`. 0 or a negative errno.
  int PrepSlot(uint32_t index);
  // Run() and RunUntil(): a wait ends at `deadline_ns` (kNoDeadline: only
  // when something arrives, and not at all when nothing could).
  int RunWith(bool wait, int64_t deadline_ns, std::vector<IoCompletion>& out);
  // Queues a read on every watched eventfd that has none.
  void ArmWakes();
  // Takes every available CQE and handles it. Returns how many completions
  // it appended to `out`.
  int Reap(std::vector<IoCompletion>& out);
  int OnIoCqe(uint32_t index, int res, std::vector<IoCompletion>& out);
  int OnWakeCqe(uint32_t index, int res, std::vector<IoCompletion>& out);
  // Resubmits slot `index`; completes it with the error if that fails.
  int Resubmit(uint32_t index, std::vector<IoCompletion>& out);
  int Finish(uint32_t index, int64_t result, std::vector<IoCompletion>& out);
  bool CanComplete() const { return inflight_ > 0 || armed_wakes_ > 0; }
  // What the ring carries now, for a flush about to be queued
  // (io/flush_policy.h).
  FlushContext FlushAt() {
    FlushContext at;
    at.borrowed = borrowed();
    at.engine_inflight = inflight_;
    if (at.borrowed) {
      at.ring_inflight = lender_->BorrowedInFlight();
      at.requests_open = lender_->RequestsOpen();
      at.completions_waiting = lender_->HasWaitingCompletions();
    }
    return at;
  }

  std::vector<int> fds_;                    // by IoRequest::file
  const std::vector<uint64_t> file_bytes_;  // by IoRequest::file
  const std::string mode_;
  const uint32_t capacity_;
  RingLender* const lender_;
  uint64_t lend_tag_ = 0;  // ORed into user_data while borrowing
  // The ring's index of offered buffer 0 (a borrowed ring's buffer table
  // is shared with its other engines).
  int buffer_base_ = 0;
  // Borrowed ring: completions handed over by OnCqe(), for the next Run().
  std::vector<IoCompletion> lent_completions_;

  io_uring own_ring_ = {};
  io_uring* ring_ = &own_ring_;
  bool ring_ready_ = false;
  int ring_error_ = 0;
  // The files are fixed files file_base_ + IoRequest::file of the ring.
  bool fixed_file_ = false;
  int file_base_ = 0;
  std::vector<iovec> offered_buffers_;
  std::atomic<bool> fixed_buffers_{false};  // offered_buffers_ registered
  bool zero_range_unsupported_ = false;
  bool shutting_down_ = false;

  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  uint32_t inflight_ = 0;
  // Of those, the ones whose completion waits for a kernel thread
  // (io/spin_policy.h).
  uint32_t worker_inflight_ = 0;

  std::vector<std::unique_ptr<WakeWatch>> wakes_;
  uint32_t armed_wakes_ = 0;
  bool wakes_need_arming_ = false;

  // CQEs copied out of the ring before handling, so that handling may queue
  // new SQEs (and even submit) without disturbing the CQ iteration.
  std::vector<std::pair<uint64_t, int>> reaped_;
};

int UringEngine::EnsureRing() {
  if (ring_ready_) return 0;
  if (ring_error_ != 0) return ring_error_;
  if (borrowed()) {
    // The owner thread's ring: its tables belong to its owner, who
    // registers our buffers and files beside its own and its other
    // engines'; no wake watches.
    ring_ = lender_->ring();
    lend_tag_ = lender_->Lend(this);
    lent_completions_.reserve(capacity_);
    if (const int base = lender_->AddFixedFiles(fds_); base >= 0) {
      file_base_ = base;
      fixed_file_ = true;
    }
    if (!offered_buffers_.empty()) {
      const int base = lender_->AddFixedBuffers(offered_buffers_);
      if (base >= 0) {
        buffer_base_ = base;
        fixed_buffers_.store(true, std::memory_order_relaxed);
      }
    }
    ring_ready_ = true;
    return 0;
  }

  const unsigned entries = RingEntries(capacity_);
  int rc = -EINVAL;
  io_uring_params params = {};
  for (unsigned flags : kSetupFlagSets) {
    params = {};
    // A CQ twice the SQ: room for every I/O in flight plus the wake reads
    // (and the kernel keeps overflowing CQEs anyway: IORING_FEAT_NODROP).
    params.flags = flags | IORING_SETUP_CQSIZE;
    params.cq_entries = 2 * entries;
    rc = io_uring_queue_init_params(entries, ring_, &params);
    if (rc != -EINVAL) break;
  }
  if (rc < 0) {
    ring_error_ = rc;
    return rc;
  }
  ring_ready_ = true;
  // Fixed files save a file-table lookup and reference per request. Not
  // essential: without them requests name the plain descriptors.
  fixed_file_ =
      io_uring_register_files(ring_, fds_.data(),
                              static_cast<unsigned>(fds_.size())) == 0;
  // Fixed buffers pin the pages once, instead of once per request. Also not
  // essential: if the kernel refuses (memlock limit, too large), requests
  // use ordinary reads and writes.
  if (!offered_buffers_.empty()) {
    fixed_buffers_.store(
        io_uring_register_buffers(
            ring_, offered_buffers_.data(),
            static_cast<unsigned>(offered_buffers_.size())) == 0,
        std::memory_order_relaxed);
  }
  reaped_.reserve(params.cq_entries);
  return 0;
}

io_uring_sqe* UringEngine::GetSqe() {
  if (io_uring_sqe* sqe = io_uring_get_sqe(ring_)) return sqe;
  int rc;
  do {
    rc = io_uring_submit(ring_);
  } while (rc == -EINTR);
  return io_uring_get_sqe(ring_);
}

int UringEngine::FixedIndex(const Slot& slot, const void* data, size_t bytes) {
  if (slot.use_cursor) return -1;
  if (slot.buffer_index >= 0 &&
      fixed_buffers_.load(std::memory_order_relaxed)) {
    return buffer_base_ + slot.buffer_index;
  }
  // Memory the ring's owner lends (the FUSE payloads, zero copy) may be a
  // fixed buffer of its ring.
  return borrowed() ? lender_->FixedBufferFor(data, bytes) : -1;
}

int UringEngine::PrepSlot(uint32_t index) {
  io_uring_sqe* sqe = GetSqe();
  if (sqe == nullptr) return -EBUSY;
  Slot& slot = slots_[index];
  const int fd = fixed_file_ ? file_base_ + slot.file : fds_[slot.file];
  switch (slot.op) {
    case IoOp::kRead:
    case IoOp::kWrite: {
      const iovec* iov = slot.use_cursor ? slot.cursor.data() : slot.iov;
      const int count = slot.use_cursor ? slot.cursor.count() : slot.iov_count;
      const uint64_t offset = slot.offset + slot.done;
      if (count == 1) {
        const auto bytes = static_cast<unsigned>(
            std::min<uint64_t>(iov[0].iov_len, kMaxSingleTransfer));
        const int fixed = FixedIndex(slot, iov[0].iov_base, bytes);
        if (fixed >= 0 && slot.op == IoOp::kRead) {
          io_uring_prep_read_fixed(sqe, fd, iov[0].iov_base, bytes, offset,
                                   fixed);
        } else if (fixed >= 0) {
          io_uring_prep_write_fixed(sqe, fd, iov[0].iov_base, bytes, offset,
                                    fixed);
        } else if (slot.op == IoOp::kRead) {
          io_uring_prep_read(sqe, fd, iov[0].iov_base, bytes, offset);
        } else {
          io_uring_prep_write(sqe, fd, iov[0].iov_base, bytes, offset);
        }
      } else if (slot.op == IoOp::kRead) {
        io_uring_prep_readv(sqe, fd, iov, static_cast<unsigned>(count), offset);
      } else {
        io_uring_prep_writev(sqe, fd, iov, static_cast<unsigned>(count),
                             offset);
      }
      break;
    }
    case IoOp::kFlush:
      io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
      break;
    case IoOp::kDiscard:
    case IoOp::kWriteZeroes:
      io_uring_prep_fallocate(sqe, fd, slot.fallocate_mode,
                              static_cast<off_t>(slot.offset),
                              static_cast<off_t>(slot.length));
      break;
  }
  if (fixed_file_) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, lend_tag_ | index);
  return 0;
}

int UringEngine::Queue(const IoRequest& request) {
  if (int rc = EnsureRing(); rc < 0) return rc;
  if (int rc = CheckRequest(request, file_bytes_.data(), file_bytes_.size());
      rc != 0) {
    return rc;
  }
  if (free_slots_.empty()) return -EBUSY;
  if (request.op == IoOp::kFlush && FlushOnCallingThread(FlushAt())) {
    // Answered by the owner's next Run() (RunWith hands out
    // lent_completions_), as a completion from the ring would be.
    const int rc = fdatasync(fds_[request.file]) == 0 ? 0 : -errno;
    lent_completions_.push_back(IoCompletion{request.tag, rc, false});
    return 0;
  }

  const uint32_t index = free_slots_.back();
  Slot& slot = slots_[index];
  slot.op = request.op;
  slot.tag = request.tag;
  slot.offset = request.offset;
  slot.length = request.length;
  slot.done = 0;
  slot.iov = request.iov;
  slot.iov_count = request.iov_count;
  slot.file = request.file;
  slot.use_cursor = false;
  slot.buffer_index = offered_buffers_.empty() || request.buffer_index < 0 ||
                              static_cast<size_t>(request.buffer_index) >=
                                  offered_buffers_.size()
                          ? -1
                          : request.buffer_index;
  slot.fallocate_mode =
      request.op == IoOp::kWriteZeroes && !zero_range_unsupported_ ? kZeroRange
                                                                   : kPunchHole;
  if (int rc = PrepSlot(index); rc < 0) return rc;
  free_slots_.pop_back();
  ++inflight_;
  if (CompletionNeedsKernelThread(slot.op)) ++worker_inflight_;
  return 0;
}

absl::Status UringEngine::WatchWakeFd(int fd, uint64_t tag) {
  if (borrowed()) {
    return absl::FailedPreconditionError(
        "an engine on a borrowed ring cannot watch wake fds; its owner does");
  }
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot watch wake fd ", fd, ": not a descriptor"));
  }
  auto watch = std::make_unique<WakeWatch>();
  watch->fd = fd;
  watch->tag = tag;
  wakes_.push_back(std::move(watch));
  // Armed (and submitted) by the next Run(). The ring is not touched here, so
  // that watching from the wrong thread cannot tie the ring to it.
  wakes_need_arming_ = true;
  return absl::OkStatus();
}

void UringEngine::ArmWakes() {
  if (!wakes_need_arming_ || shutting_down_) return;
  wakes_need_arming_ = false;
  for (size_t i = 0; i < wakes_.size(); ++i) {
    WakeWatch& watch = *wakes_[i];
    if (watch.armed || watch.broken) continue;
    io_uring_sqe* sqe = GetSqe();
    if (sqe == nullptr) {
      wakes_need_arming_ = true;  // try again on the next Run()
      return;
    }
    // Offset 0: an eventfd has no file position; any offset is ignored.
    io_uring_prep_read(sqe, watch.fd, &watch.counter, sizeof(watch.counter), 0);
    io_uring_sqe_set_data64(sqe, kWakeBit | i);
    watch.armed = true;
    ++armed_wakes_;
  }
}

int UringEngine::RunWith(bool wait, int64_t deadline_ns,
                         std::vector<IoCompletion>& out) {
  if (int rc = EnsureRing(); rc < 0) return rc;
  if (borrowed()) {
    // The owner submits and reaps; hand out what it passed on. Never waits.
    const int appended = static_cast<int>(lent_completions_.size());
    out.insert(out.end(), lent_completions_.begin(), lent_completions_.end());
    lent_completions_.clear();
    return appended;
  }
  const bool timed = deadline_ns != kNoDeadline;
  int appended = 0;
  for (;;) {
    ArmWakes();
    // With nothing that could ever complete, waiting would hang forever.
    bool block = wait && appended == 0 && (timed || CanComplete());
    int rc;
    if (block && timed) {
      // The deadline is the wait's own timeout (IORING_ENTER_EXT_ARG on
      // kernels that have it): no timer to arm, no extra system call.
      const timespec left = TimeLeft(deadline_ns);
      __kernel_timespec timeout = {.tv_sec = left.tv_sec,
                                   .tv_nsec = left.tv_nsec};
      io_uring_cqe* cqe = nullptr;
      rc = left.tv_sec == 0 && left.tv_nsec == 0
               ? io_uring_submit_and_wait(ring_, 0)
               : io_uring_submit_and_wait_timeout(ring_, &cqe, 1, &timeout,
                                                  nullptr);
      if (rc == -ETIME) rc = 0;
    } else {
      rc = io_uring_submit_and_wait(ring_, block ? 1 : 0);
    }
    // EINTR: a signal; EBUSY/EAGAIN: the kernel wants CQEs reaped (or memory)
    // before it takes more. Reaping below and looping handles all three.
    if (rc < 0 && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN) {
      return appended > 0 ? appended : rc;
    }
    appended += Reap(out);
    // A reaped CQE may have been a short transfer or a wake read that had to
    // be re-armed, reporting nothing: then keep waiting (until the deadline).
    if (!wait || appended > 0) return appended;
    if (timed ? MonotonicNowNs() >= deadline_ns : !CanComplete()) {
      return appended;
    }
  }
}

int UringEngine::Reap(std::vector<IoCompletion>& out) {
  reaped_.clear();
  unsigned head;
  unsigned count = 0;
  io_uring_cqe* cqe;
  io_uring_for_each_cqe(ring_, head, cqe) {
    reaped_.emplace_back(io_uring_cqe_get_data64(cqe), cqe->res);
    ++count;
  }
  io_uring_cq_advance(ring_, count);

  int appended = 0;
  for (const auto& [data, res] : reaped_) {
    if (data & kInternalBit) continue;
    if (data & kWakeBit) {
      appended += OnWakeCqe(static_cast<uint32_t>(data & ~kWakeBit), res, out);
    } else {
      appended += OnIoCqe(static_cast<uint32_t>(data), res, out);
    }
  }
  return appended;
}

int UringEngine::OnIoCqe(uint32_t index, int res,
                         std::vector<IoCompletion>& out) {
  Slot& slot = slots_[index];
  if (shutting_down_) return Finish(index, res < 0 ? res : -ECANCELED, out);
  if (res == -EAGAIN) return Resubmit(index, out);
  switch (slot.op) {
    case IoOp::kRead:
    case IoOp::kWrite:
      if (res < 0) return Finish(index, res, out);
      // No progress: end of file on a read (the image shrank under us), or
      // a write the filesystem will not take. Resubmitting would spin.
      if (res == 0) return Finish(index, -EIO, out);
      slot.done += static_cast<uint64_t>(res);
      if (slot.done >= slot.length) {
        return Finish(index, static_cast<int64_t>(slot.length), out);
      }
      // Short transfer: continue with the rest from a private iovec copy.
      slot.cursor.Reset(slot.iov, slot.iov_count, slot.done);
      slot.use_cursor = true;
      return Resubmit(index, out);
    case IoOp::kFlush:
      return Finish(index, res < 0 ? res : 0, out);
    case IoOp::kDiscard:
    case IoOp::kWriteZeroes:
      if (res == -EOPNOTSUPP && slot.fallocate_mode == kZeroRange) {
        // The filesystem cannot zero a range in place: punch a hole, which
        // reads back as zeros too. Remembered for later requests.
        zero_range_unsupported_ = true;
        slot.fallocate_mode = kPunchHole;
        return Resubmit(index, out);
      }
      return Finish(index, res < 0 ? res : static_cast<int64_t>(slot.length),
                    out);
  }
  return Finish(index, -EINVAL, out);
}

int UringEngine::OnWakeCqe(uint32_t index, int res,
                           std::vector<IoCompletion>& out) {
  WakeWatch& watch = *wakes_[index];
  watch.armed = false;
  --armed_wakes_;
  if (shutting_down_) return 0;
  wakes_need_arming_ = true;
  // Nothing was read (a non-blocking eventfd raced with another reader, or
  // the read was interrupted): just read again.
  if (res == -EAGAIN || res == -EINTR) return 0;
  // A failed read means a broken descriptor. Report one wake-up so that its
  // owner looks at its state, but stop watching it: re-arming would fail in
  // a loop.
  if (res < 0) watch.broken = true;
  out.push_back(IoCompletion{watch.tag, 0, true});
  return 1;
}

int UringEngine::Resubmit(uint32_t index, std::vector<IoCompletion>& out) {
  if (int rc = PrepSlot(index); rc < 0) return Finish(index, rc, out);
  return 0;
}

int UringEngine::Finish(uint32_t index, int64_t result,
                        std::vector<IoCompletion>& out) {
  free_slots_.push_back(index);
  --inflight_;
  if (CompletionNeedsKernelThread(slots_[index].op)) --worker_inflight_;
  if (shutting_down_) return 0;
  out.push_back(IoCompletion{slots_[index].tag, result, false});
  return 1;
}

UringEngine::~UringEngine() {
  if (!ring_ready_) return;
  if (borrowed()) {
    // The owner detaches engines only once nothing is in flight (see
    // CreateUringEngine); the ring is its to close. The image's files leave
    // the ring's table now: the ring must not keep them open (and locked)
    // after the image closes them.
    if (fixed_file_) lender_->RemoveFixedFiles(file_base_, fds_.size());
    lender_->Unlend(lend_tag_);
    return;
  }
  // Closing an io_uring does not wait for its requests: the kernel cancels
  // them in the background, and a read that completes meanwhile would still
  // write into memory. So first cancel the eventfd reads (they would
  // otherwise wait forever) and wait for every request, the caller's I/O
  // included, to finish; only then close the ring and free the buffers.
  shutting_down_ = true;
  for (size_t i = 0; i < wakes_.size(); ++i) {
    if (!wakes_[i]->armed) continue;
    io_uring_sqe* sqe = GetSqe();
    if (sqe == nullptr) break;
    io_uring_prep_cancel64(sqe, kWakeBit | i, 0);
    io_uring_sqe_set_data64(sqe, kInternalBit);
  }
  std::vector<IoCompletion> ignored;
  int idle_waits = 0;
  while (CanComplete()) {
    __kernel_timespec timeout = {.tv_sec = 0, .tv_nsec = 100'000'000};
    io_uring_cqe* cqe = nullptr;
    int rc =
        io_uring_submit_and_wait_timeout(ring_, &cqe, 1, &timeout, nullptr);
    if (rc == -EINTR) continue;
    if (rc == -ETIME) {
      // I/O always finishes; keep waiting for it. A wake read that neither
      // completes nor cancels within a second is given up on below.
      if (inflight_ == 0 && ++idle_waits >= 10) break;
      continue;
    }
    // Any other error, e.g. EEXIST when destroyed on a thread other than the
    // one that used the ring: nothing more can be done from here.
    if (rc < 0) break;
    idle_waits = 0;
    Reap(ignored);
  }
  if (armed_wakes_ > 0) {
    // Some eventfd read may still write its 8-byte buffer: leak those
    // buffers on purpose rather than let the kernel write into freed memory.
    for (auto& watch : wakes_) {
      if (watch->armed) static_cast<void>(watch.release());
    }
  }
  io_uring_queue_exit(ring_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringEngine(
    const EngineFiles& files, const EngineOptions& options) {
  // The real ring is made later on the thread that uses it; a throwaway one
  // here turns "no io_uring on this system" into an error at mount time.
  io_uring probe;
  if (int rc = io_uring_queue_init(2, &probe, 0); rc < 0) {
    return ErrnoError(-rc, "io_uring is not available");
  }
  io_uring_queue_exit(&probe);
  return std::make_unique<UringEngine>(files, options.depth + options.extra_ios,
                                       options.ring_lender);
}

}  // namespace pvdisk::io
