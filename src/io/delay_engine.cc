#include "io/delay_engine.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/deadline.h"
#include "io/engine_decorator.h"
#include "io/ring_timer.h"

namespace pvdisk::io {
namespace {

constexpr int64_t kNanosPerMicro = 1'000;

// A sleeping CPU wakes late: on a virtual machine whose vCPU halted, a
// wake-up due in 2 ms comes 60-150 us after it (measured here), which would
// turn a 2 ms model into 2.1-2.2 ms. So the sleep ends early by the
// lateness this engine has seen, and the rest is spun: the engine learns
// how late its own sleeps end (fast when they get later, slowly when they
// get earlier, so the margin covers the usual worst case) and never spins
// more than kMaxSpinNs per due time. Where wake-ups are punctual the
// margin shrinks to a few microseconds and so does the spin.
constexpr int64_t kInitialMarginNs = 20 * kNanosPerMicro;
constexpr int64_t kMaxSpinNs = 300 * kNanosPerMicro;
constexpr int64_t kMarginSlackNs = 10 * kNanosPerMicro;

// While it spins, the engine looks at the inner engine this often, so
// that a kick or an inner completion waits no longer than that: a look is
// a system call, the spin between looks only reads the clock.
constexpr int64_t kSpinLookNs = 20 * kNanosPerMicro;

// Completions due close together are released together, at the latest
// due time among them: a batch is every held completion due within the
// slack of its earliest, and the slack is this fraction of the delay
// (1/32: ~3%). At depth completions are due every few microseconds, and
// released one by one each needs its own wake-up of the thread that
// answers them and its own round there (an io_uring_enter, a FUSE commit);
// released a batch at a time they share them. A completion waits at most
// the slack beyond its due time, half of it on average when they are
// dense; one that has no neighbour within the slack (iodepth 1) waits
// nothing extra. None is ever released before its own due time.
constexpr int64_t kBatchSlackDivisor = 32;

class DelayEngine final : public EngineDecorator {
 public:
  DelayEngine(std::unique_ptr<IoEngine> inner, CompletionDelay delay,
              uint32_t depth, RingLender* lender)
      : EngineDecorator(std::move(inner), Describe(delay)),
        delay_ns_(int64_t{delay.us} * kNanosPerMicro),
        write_delay_ns_(int64_t{delay.write_us} * kNanosPerMicro),
        slack_ns_(std::min(delay_ns_, write_delay_ns_) / kBatchSlackDivisor),
        pending_(depth),
        lender_(lender) {
    free_.reserve(depth);
    batch_.reserve(depth);
    released_.reserve(depth);
    for (uint32_t i = depth; i > 0; --i) free_.push_back(i - 1);
    std::vector<Held> storage;
    storage.reserve(depth);
    held_ = HeldHeap(std::greater<Held>(), std::move(storage));
    if (lender != nullptr) ring_timer_ = std::make_unique<RingTimer>(lender);
  }

  int Queue(const IoRequest& request) override {
    if (free_.empty()) return -EBUSY;  // more than `depth` in flight
    // Due from before the inner engine sees it: the sync engine does its
    // I/O inside Queue(), and the delay is a floor, not an addition.
    const int64_t due_ns =
        MonotonicNowNs() +
        (request.op == IoOp::kWrite ? write_delay_ns_ : delay_ns_);
    const uint32_t index = free_.back();
    IoRequest forwarded = request;
    forwarded.tag = index;
    if (int rc = inner().Queue(forwarded); rc < 0) return rc;
    free_.pop_back();
    pending_[index] = Pending{request.tag, next_sequence_++, due_ns};
    return 0;
  }

  absl::Status WatchWakeFd(int fd, uint64_t tag) override {
    absl::Status watched = inner().WatchWakeFd(fd, tag);
    if (watched.ok()) watching_ = true;
    return watched;
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    return wait ? RunUntil(kNoDeadline, out) : Look(out);
  }

  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    int appended = 0;
    for (;;) {
      int64_t now = MonotonicNowNs();
      // Sleep in the inner engine (until a kick, an inner completion, the
      // caller's deadline or the margin before the next release), unless
      // that time has come: then spin until the release.
      const int64_t release = NextReleaseNs();
      const int64_t wake = release == kNoDeadline
                               ? deadline_ns
                               : std::min(deadline_ns, release - margin_ns_);
      const bool sleep = wake > now && (wake != kNoDeadline || CanComplete());
      if (!sleep && appended == 0 && release != kNoDeadline) {
        // Within the margin of a release: spin towards it, looking at the
        // inner engine now and then.
        SpinUntil(std::min({deadline_ns, release, now + kSpinLookNs}));
      }
      reaped_.clear();
      const int rc = !sleep                ? inner().Run(false, reaped_)
                     : wake == kNoDeadline ? inner().Run(true, reaped_)
                                           : inner().RunUntil(wake, reaped_);
      if (rc < 0) return rc;
      appended += Sort(out);
      now = MonotonicNowNs();
      if (sleep && reaped_.empty() && wake < deadline_ns) {
        Learn(now - wake);  // the sleep ended by its time: how late
      }
      appended += ReleaseDue(now, out);
      // Go on until something can be returned or the deadline, unless
      // nothing could ever arrive (no request held or in flight, no fd
      // watched, no deadline): then 0 rather than a hang.
      if (appended > 0 || now >= deadline_ns) return appended;
      if (deadline_ns == kNoDeadline && !CanComplete()) return 0;
    }
  }

  uint32_t inflight() const override {
    return inner().inflight() + static_cast<uint32_t>(held_.size()) +
           static_cast<uint32_t>(batch_.size());
  }

 private:
  // A request the inner engine has: its caller's tag and when it is due.
  struct Pending {
    uint64_t tag = 0;
    uint64_t sequence = 0;
    int64_t due_ns = 0;
  };
  // A completion the inner engine returned, held until due.
  struct Held {
    int64_t due_ns;
    uint64_t sequence;  // queue order: breaks ties between equal due times
    uint64_t tag;
    int64_t result;
    bool operator>(const Held& other) const {
      return due_ns != other.due_ns ? due_ns > other.due_ns
                                    : sequence > other.sequence;
    }
    bool operator<(const Held& other) const { return other > *this; }
  };
  using HeldHeap =
      std::priority_queue<Held, std::vector<Held>, std::greater<Held>>;

  static std::string Describe(CompletionDelay delay) {
    std::string text =
        absl::StrCat("completions held ", delay.us, " us after submission");
    if (delay.write_us != delay.us) {
      absl::StrAppend(&text, " (writes ", delay.write_us, " us)");
    }
    return text;
  }

  // Run(wait=false): one look, never a sleep. Where the driving thread
  // sleeps on its own ring, this is the engine's only Run: it leaves a
  // timeout there for the next due time.
  int Look(std::vector<IoCompletion>& out) {
    reaped_.clear();
    const int rc = inner().Run(false, reaped_);
    if (rc < 0) return rc;
    // The inner engine's steps of progress without a completion (a fan-out
    // under the delay) are passed on: its follow-up I/O waits for the next
    // Run(), which the caller owes before it sleeps.
    const int progress = rc - static_cast<int>(reaped_.size());
    int appended = Sort(out);
    int64_t now = MonotonicNowNs();
    if (ring_timer_ != nullptr) {
      if (int64_t late = ring_timer_->TakeLateness(); late >= 0) Learn(late);
      const bool fired = ring_timer_->TakeFired();
      // Woken within the margin before a release: spin the rest, unless
      // the driving thread has other work waiting on its ring (a FUSE
      // request that arrives meanwhile would otherwise wait for the
      // release before anyone takes it and its own delay starts). Then
      // this returns early, the timeout below is for a time already past
      // (the thread's next round comes back here and spins on), and the
      // sleep's lateness is not learned from it (ring_timer.h).
      //
      // Nor when the previous look released completions and no timeout
      // has fired since: this look is then mostly the same round's next
      // pass (BackendLoop::RunRound), and the replies to what was
      // released are made but not yet committed; they reach the caller
      // at the end of the round, so a spin here would hold them until the
      // next release. Instead the round ends, they go, and the timeout
      // queued below (for a time already past) brings the thread back to
      // spin. (A later round woken by something else, a new request, also
      // skips the spin once: it costs that round's return trip, not
      // lateness.)
      // Measured: 500 us, iodepth 4-8, inline: released one batch after
      // another within one round, they went together, and fio's clat was
      // 1.15 D where the delay model's floor (one look a round) made 1.10
      // (docs/perf/config-one-wakes-2026-12-06.md).
      const int64_t release = NextReleaseNs();
      if (release != kNoDeadline && release > now &&
          release <= now + margin_ns_ && (fired || !released_last_look_)) {
        SpinUntil(release, lender_);
        now = MonotonicNowNs();
      }
    }
    const int released = ReleaseDue(now, out);
    released_last_look_ = released > 0;
    appended += released;
    if (ring_timer_ != nullptr) {
      if (const int64_t release = NextReleaseNs(); release != kNoDeadline) {
        ring_timer_->WakeBy(release - margin_ns_);
      }
    }
    return appended + progress;
  }

  // Sorts what the inner engine returned into reaped_: completions are
  // held, wake-ups passed on to `out`. Returns how many it appended.
  int Sort(std::vector<IoCompletion>& out) {
    int appended = 0;
    for (const IoCompletion& completion : reaped_) {
      if (completion.wake) {
        out.push_back(completion);
        ++appended;
      } else {
        Hold(completion);
      }
    }
    return appended;
  }

  // Each turn yields the CPU: the threads that feed the engine and take
  // its completions (fio, the FUSE queue threads) may need this one, and
  // a yield to nobody keeps the CPU awake all the same. With `lender`
  // (the driving thread's ring), it stops early once completions wait
  // there for the thread.
  static void SpinUntil(int64_t until_ns, RingLender* lender = nullptr) {
    while (MonotonicNowNs() < until_ns) {
      if (lender != nullptr && lender->HasWaitingCompletions()) return;
      sched_yield();
    }
  }

  bool DueBy(int64_t now_ns) const {
    return !held_.empty() && held_.top().due_ns <= now_ns;
  }

  // Whether a blocking inner Run() can ever return: something is held (its
  // due time ends the wait), the inner engine completes what it has, and
  // callers' fds may fire.
  bool CanComplete() const {
    return !held_.empty() || !batch_.empty() || inner().inflight() > 0 ||
           watching_;
  }

  // A held completion joins the open batch when it is due within the
  // batch's slack (one the inner engine returned after the batch formed),
  // else the heap.
  void Hold(const IoCompletion& completion) {
    const auto index = static_cast<uint32_t>(completion.tag);
    const Pending& pending = pending_[index];
    const Held held{pending.due_ns, pending.sequence, pending.tag,
                    completion.result};
    free_.push_back(index);
    if (!batch_.empty() && held.due_ns >= batch_.front().due_ns &&
        held.due_ns <= batch_.front().due_ns + slack_ns_) {
      batch_.insert(std::upper_bound(batch_.begin(), batch_.end(), held), held);
      batch_end_ns_ = std::max(batch_end_ns_, held.due_ns);
      return;
    }
    held_.push(held);
  }

  // Opens a batch, if none is open, with the earliest held completion and
  // every other due within the slack of it.
  void FormBatch() {
    if (!batch_.empty() || held_.empty()) return;
    const int64_t limit = held_.top().due_ns + slack_ns_;
    while (!held_.empty() && held_.top().due_ns <= limit) {
      batch_.push_back(held_.top());
      batch_end_ns_ = held_.top().due_ns;  // the heap pops in due order
      held_.pop();
    }
  }

  // When the next completion may be released: the open batch's last due
  // time, or a held one's own due time if earlier (a shorter delay queued
  // after the batch formed). kNoDeadline when nothing is held.
  int64_t NextReleaseNs() {
    FormBatch();
    int64_t next = batch_.empty() ? kNoDeadline : batch_end_ns_;
    if (!held_.empty()) next = std::min(next, held_.top().due_ns);
    return next;
  }

  // Appends what is due by `now_ns`: the open batch once its last member
  // is due, and held completions each at its own due time; in due order.
  int ReleaseDue(int64_t now_ns, std::vector<IoCompletion>& out) {
    FormBatch();
    released_.clear();
    if (!batch_.empty() && batch_end_ns_ <= now_ns) {
      released_.swap(batch_);
    }
    const size_t from_batch = released_.size();
    while (DueBy(now_ns)) {
      released_.push_back(held_.top());
      held_.pop();
    }
    if (from_batch > 0 && from_batch < released_.size()) {
      std::sort(released_.begin(), released_.end());
    }
    for (const Held& held : released_) {
      out.push_back(IoCompletion{held.tag, held.result, false});
    }
    return static_cast<int>(released_.size());
  }

  // Folds how late a sleep ended into the margin: up by half the
  // difference, down by 1/64 of it, plus a little slack.
  void Learn(int64_t late_ns) {
    if (late_ns < 0) return;
    lateness_ns_ += late_ns > lateness_ns_ ? (late_ns - lateness_ns_) / 2
                                           : (late_ns - lateness_ns_) / 64;
    margin_ns_ = std::min(lateness_ns_ + kMarginSlackNs, kMaxSpinNs);
  }

  const int64_t delay_ns_;
  const int64_t write_delay_ns_;
  const int64_t slack_ns_;        // a batch's width (kBatchSlackDivisor)
  std::vector<Pending> pending_;  // by the tag given to the inner engine
  RingLender* const lender_;      // the driving thread's ring, or null
  std::vector<uint32_t> free_;    // unused indices of pending_
  uint64_t next_sequence_ = 0;
  HeldHeap held_;
  std::vector<Held> batch_;                // the open batch, in due order
  int64_t batch_end_ns_ = 0;               // the latest due time in batch_
  std::vector<Held> released_;             // ReleaseDue's scratch
  bool released_last_look_ = false;        // Look() released completions
  bool watching_ = false;                  // a caller's fd is watched
  std::unique_ptr<RingTimer> ring_timer_;  // with a lent ring only
  int64_t lateness_ns_ = 0;                // how late sleeps end, tracked high
  int64_t margin_ns_ = kInitialMarginNs;
  std::vector<IoCompletion> reaped_;  // the inner engine's, per Run()
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithDelay(std::unique_ptr<IoEngine> inner,
                                        CompletionDelay delay, uint32_t depth,
                                        RingLender* lender) {
  return std::make_unique<DelayEngine>(std::move(inner), delay, depth, lender);
}

}  // namespace pvdisk::io
