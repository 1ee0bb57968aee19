#include "io/delay_engine.h"

#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "io/engine_decorator.h"

namespace pvdisk::io {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;
constexpr int64_t kNanosPerMicro = 1'000;

// A sleeping CPU wakes late: on a virtual machine whose vCPU halted, a
// timer due in 2 ms fires 60-150 us after it (measured here), which would
// turn a 2 ms model into 2.1-2.2 ms. So the timer is armed early by the
// lateness this engine has seen, and the rest is spun: the engine learns
// how late its own timer wakes it (fast when it gets later, slowly when it
// gets earlier, so the margin covers the usual worst case) and never spins
// more than kMaxSpinNs per due time. On a machine whose timers are
// punctual the margin shrinks to a few microseconds and so does the spin.
constexpr int64_t kInitialMarginNs = 20 * kNanosPerMicro;
constexpr int64_t kMaxSpinNs = 300 * kNanosPerMicro;
constexpr int64_t kMarginSlackNs = 10 * kNanosPerMicro;

// The wake tag under which the inner engine watches the timer. Callers'
// watches are forwarded under their index in `wake_tags_`, so none can
// collide with it.
constexpr uint64_t kTimerWatch = ~uint64_t{0};

int64_t NowNanos() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * kNanosPerSecond + now.tv_nsec;
}

// A descriptor closed when it goes out of scope.
struct ScopedFd {
  explicit ScopedFd(int descriptor) : fd(descriptor) {}
  ~ScopedFd() { close(fd); }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  const int fd;
};

// The timer, as a base of DelayEngine listed before EngineDecorator: bases
// are destroyed in reverse order, so the timer is closed after the inner
// engine, which watches it (a watched fd must outlive the engine watching
// it).
struct DelayTimer {
  explicit DelayTimer(int fd) : timer_(fd) {}
  ScopedFd timer_;
};

class DelayEngine final : private DelayTimer, public EngineDecorator {
 public:
  DelayEngine(std::unique_ptr<IoEngine> inner, CompletionDelay delay,
              uint32_t depth, int timer_fd)
      : DelayTimer(timer_fd),
        EngineDecorator(std::move(inner), Describe(delay)),
        delay_ns_(int64_t{delay.us} * kNanosPerMicro),
        write_delay_ns_(int64_t{delay.write_us} * kNanosPerMicro),
        pending_(depth) {
    free_.reserve(depth);
    for (uint32_t i = depth; i > 0; --i) free_.push_back(i - 1);
    std::vector<Held> storage;
    storage.reserve(depth);
    held_ = HeldHeap(std::greater<Held>(), std::move(storage));
  }

  absl::Status WatchTimer() {
    return inner().WatchWakeFd(timer_.fd, kTimerWatch);
  }

  int Queue(const IoRequest& request) override {
    if (free_.empty()) return -EBUSY;  // more than `depth` in flight
    // Due from before the inner engine sees it: the sync engine does its
    // I/O inside Queue(), and the delay is a floor, not an addition.
    const int64_t due_ns =
        NowNanos() + (request.op == IoOp::kWrite ? write_delay_ns_ : delay_ns_);
    const uint32_t index = free_.back();
    IoRequest forwarded = request;
    forwarded.tag = index;
    if (int rc = inner().Queue(forwarded); rc < 0) return rc;
    free_.pop_back();
    pending_[index] = Pending{request.tag, next_sequence_++, due_ns};
    return 0;
  }

  absl::Status WatchWakeFd(int fd, uint64_t tag) override {
    absl::Status watched = inner().WatchWakeFd(fd, wake_tags_.size());
    if (watched.ok()) wake_tags_.push_back(tag);
    return watched;
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    int appended = 0;
    for (;;) {
      // Sleep in the inner engine (until a kick, an inner completion or the
      // timer) only while nothing is due before the timer could wake us;
      // closer than that, spin (look without blocking) until it is due.
      const bool block =
          wait && !DueBy(NowNanos() + margin_ns_) && CanComplete();
      reaped_.clear();
      const int rc = inner().Run(block, reaped_);
      if (rc < 0) return rc;
      for (const IoCompletion& completion : reaped_) {
        if (!completion.wake) {
          Hold(completion);
        } else if (completion.tag != kTimerWatch) {
          out.push_back(IoCompletion{wake_tags_[completion.tag], 0, true});
          ++appended;
        }
        // The timer's own wake-up means "look at the heap again", and
        // tells how late the timer fires.
        if (completion.wake && completion.tag == kTimerWatch) LearnLateness();
      }
      appended += ReleaseDue(NowNanos(), out);
      if (int armed = ArmTimer(); armed < 0) return armed;
      // Without `wait`, one look is all; with it, go on until something
      // can be returned, unless nothing could ever arrive (no request held
      // or in flight, no caller's fd watched): then 0 rather than a hang.
      if (!wait || appended > 0 || !CanComplete()) return appended;
    }
  }

  uint32_t inflight() const override {
    return inner().inflight() + static_cast<uint32_t>(held_.size());
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

  bool DueBy(int64_t now_ns) const {
    return !held_.empty() && held_.top().due_ns <= now_ns;
  }

  // Whether a blocking inner Run() can ever return: the timer is armed
  // while something is held, the inner engine completes what it has, and
  // callers' fds may fire.
  bool CanComplete() const {
    return !held_.empty() || inner().inflight() > 0 || !wake_tags_.empty();
  }

  void Hold(const IoCompletion& completion) {
    const auto index = static_cast<uint32_t>(completion.tag);
    const Pending& pending = pending_[index];
    held_.push(
        Held{pending.due_ns, pending.sequence, pending.tag, completion.result});
    free_.push_back(index);
  }

  int ReleaseDue(int64_t now_ns, std::vector<IoCompletion>& out) {
    int released = 0;
    while (DueBy(now_ns)) {
      out.push_back(IoCompletion{held_.top().tag, held_.top().result, false});
      held_.pop();
      ++released;
    }
    return released;
  }

  // Arms the timer for the earliest held completion, early by the margin,
  // unless it already is. A stale expiry (for a completion released
  // meanwhile) costs one extra look at the heap, so an empty heap leaves
  // the timer alone. 0 or -errno.
  int ArmTimer() {
    if (held_.empty() || held_.top().due_ns == armed_due_ns_) return 0;
    const int64_t due = held_.top().due_ns;
    // At least 1 ns: an all-zero it_value would disarm the timer.
    const int64_t wake = std::max<int64_t>(due - margin_ns_, 1);
    itimerspec when = {};
    when.it_value.tv_sec = static_cast<time_t>(wake / kNanosPerSecond);
    when.it_value.tv_nsec = static_cast<long>(wake % kNanosPerSecond);
    if (timerfd_settime(timer_.fd, TFD_TIMER_ABSTIME, &when, nullptr) != 0) {
      return -errno;
    }
    armed_due_ns_ = due;
    armed_wake_ns_ = wake;
    return 0;
  }

  // Folds how late the timer woke the backend into the margin: up by half
  // the difference, down by 1/64 of it, plus a little slack.
  void LearnLateness() {
    if (armed_wake_ns_ < 0) return;
    const int64_t late = NowNanos() - armed_wake_ns_;
    armed_wake_ns_ = -1;   // one sample per arming
    if (late < 0) return;  // a stale expiry from before a re-arm
    lateness_ns_ += late > lateness_ns_ ? (late - lateness_ns_) / 2
                                        : (late - lateness_ns_) / 64;
    margin_ns_ = std::min(lateness_ns_ + kMarginSlackNs, kMaxSpinNs);
  }

  const int64_t delay_ns_;
  const int64_t write_delay_ns_;
  std::vector<Pending> pending_;  // by the tag given to the inner engine
  std::vector<uint32_t> free_;    // unused indices of pending_
  uint64_t next_sequence_ = 0;
  HeldHeap held_;
  int64_t armed_due_ns_ = -1;
  int64_t armed_wake_ns_ = -1;  // when the armed timer should fire
  int64_t lateness_ns_ = 0;     // how late it fires, tracked high
  int64_t margin_ns_ = kInitialMarginNs;
  std::vector<uint64_t> wake_tags_;   // callers' tags, by forwarded tag
  std::vector<IoCompletion> reaped_;  // the inner engine's, per Run()
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoEngine>> WrapWithDelay(
    std::unique_ptr<IoEngine> inner, CompletionDelay delay, uint32_t depth) {
  // Blocking on purpose: the uring engine waits on watched fds with a read,
  // which on a non-blocking fd would fail with EAGAIN instead of waiting.
  const int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  if (timer_fd < 0) return ErrnoError(errno, "timerfd_create for delay=");
  auto engine =
      std::make_unique<DelayEngine>(std::move(inner), delay, depth, timer_fd);
  if (absl::Status watched = engine->WatchTimer(); !watched.ok()) {
    return watched;
  }
  return engine;
}

}  // namespace pvdisk::io
