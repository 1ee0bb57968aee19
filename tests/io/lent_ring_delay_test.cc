// The delay model where the thread that drives the engine owns the ring and
// does the sleeping (the inline placement): that thread only ever waits in
// io_uring_enter on its own ring and calls Run(wait=false), so the due
// times must be events of that ring. Here the test thread is the owner: it
// waits for one CQE at a time, hands lent ones to their sinks, and looks at
// the engine after each. Completions come back no earlier than due, in due
// order, and nothing but the ring ever wakes the owner: without the timeout
// the engine leaves there, the null engine's held completions would never
// end the owner's wait (the wait is guarded, and such a stall fails).
#include <liburing.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "io/deadline.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"
#include "io/ring_lender.h"
#include "io/ring_timer.h"

namespace pvdisk::io::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

// A ring and its owner's loop, as the FUSE queue thread keeps them.
class OwnedRing final : public RingLender {
 public:
  OwnedRing() { ok_ = io_uring_queue_init(64, &ring_, 0) == 0; }
  ~OwnedRing() override {
    if (ok_) io_uring_queue_exit(&ring_);
  }
  bool ok() const { return ok_; }

  io_uring* ring() override { return &ring_; }
  uint64_t Lend(CqeSink* sink) override {
    sinks_.push_back(sink);
    return uint64_t{sinks_.size()} << kSinkBits;
  }
  void Unlend(uint64_t tag) override {
    sinks_[(tag >> kSinkBits) - 1] = nullptr;
  }
  int AddFixedBuffers(const std::vector<iovec>&) override { return -1; }
  int FixedBufferFor(const void*, size_t) override { return -1; }
  // `busy`: the owner always has other work waiting (as a FUSE queue
  // thread whose requests keep arriving), so a borrower never spins.
  bool HasWaitingCompletions() override {
    ++waiting_asked;
    return busy || io_uring_cq_ready(&ring_) > 0;
  }
  bool busy = false;
  int waiting_asked = 0;

  // Submits what the borrowers queued and waits for at least one CQE
  // (at most `guard`), handing each to its sink. False if the guard ran
  // out: nothing on the ring would have woken the owner.
  bool WaitAndRoute(std::chrono::microseconds guard) {
    __kernel_timespec timeout = {.tv_sec = guard.count() / 1'000'000,
                                 .tv_nsec = guard.count() % 1'000'000 * 1000};
    io_uring_cqe* cqe = nullptr;
    int rc;
    do {
      rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &timeout, nullptr);
    } while (rc == -EINTR);
    if (rc == -ETIME) return false;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      const uint64_t index = cqe->user_data >> kSinkBits;
      if (index >= 1 && index <= sinks_.size() && sinks_[index - 1]) {
        sinks_[index - 1]->OnCqe(cqe->user_data, cqe->res);
      }
    }
    io_uring_cq_advance(&ring_, seen);
    return true;
  }

 private:
  io_uring ring_{};
  bool ok_ = false;
  std::vector<CqeSink*> sinks_;
};

std::string KindName(const ::testing::TestParamInfo<EngineKind>& info) {
  return std::string(EngineKindName(info.param));
}

class LentRingDelayTest : public EngineFixture,
                          public ::testing::TestWithParam<EngineKind> {
 protected:
  // The engine goes before the ring, as the inline driver releases it.
  void TearDown() override { engine_.reset(); }

  // Makes an engine of the test's kind, depth 16, with `delay`, on the
  // owner's ring. Returns why it could not be made ("" when made; the
  // test skips on anything else).
  std::string SetUpDelayedEngine(CompletionDelay delay) {
    if (!owner.ok()) return "io_uring unavailable";
    EngineOptions options;
    options.kind = GetParam();
    options.depth = 16;
    options.delay = delay;
    options.ring_lender = &owner;
    std::string skip_reason;
    SetUpEngine(options, skip_reason);
    if (skip_reason.empty() && engine_ == nullptr) return "no engine made";
    return skip_reason;
  }

  OwnedRing owner;
};

TEST_P(LentRingDelayTest, DueTimesWakeTheRingsOwner) {
  if (std::string skip = SetUpDelayedEngine(CompletionDelay{20'000, 5'000});
      !skip.empty()) {
    GTEST_SKIP() << skip;
  }

  AlignedBuffer data(8 * 512);
  std::memset(data.data(), 'x', data.size());
  std::vector<std::vector<iovec>> iovs;
  for (int i = 0; i < 8; ++i) iovs.push_back({{data.data() + i * 512, 512}});
  // Reads 1..4 (20 ms) and writes 5..8 (5 ms), interleaved.
  const Clock::time_point queued = Clock::now();
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, i * 512, iovs[i], 1 + i)), 0);
    ASSERT_EQ(
        engine_->Queue(Rw(IoOp::kWrite, (4 + i) * 512, iovs[4 + i], 5 + i)), 0);
  }
  // The owner's loop: look at the engine, and sleep on the ring only.
  std::vector<IoCompletion> done;
  std::vector<Clock::duration> when;
  for (int rounds = 0; done.size() < 8 && rounds < 10000; ++rounds) {
    std::vector<IoCompletion> out;
    ASSERT_GE(engine_->Run(/*wait=*/false, out), 0);
    for (const IoCompletion& c : out) {
      done.push_back(c);
      when.push_back(Clock::now() - queued);
    }
    if (done.size() < 8) {
      ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)))
          << "the owner's wait was not ended by the held completions' due "
             "times ("
          << done.size() << " of 8 back)";
    }
  }
  ASSERT_EQ(done.size(), 8u);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].result, 512) << i;
    const bool write = done[i].tag >= 5;
    EXPECT_GE(when[i], microseconds(write ? 5'000 : 20'000))
        << "tag " << done[i].tag << " came before its delay";
  }
  // Due order, queue order among equals, exactly where the inner engine
  // answers at once; with real I/O, every request once.
  std::vector<uint64_t> tags;
  for (const IoCompletion& c : done) tags.push_back(c.tag);
  if (GetParam() == EngineKind::kNull) {
    EXPECT_EQ(tags, (std::vector<uint64_t>{5, 6, 7, 8, 1, 2, 3, 4}));
  } else {
    std::sort(tags.begin(), tags.end());
    EXPECT_EQ(tags, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  }
  EXPECT_EQ(engine_->inflight(), 0u);

  // An owner whose round comes often for other reasons (here at least
  // every 100 us) looks at the engine before the due time many times:
  // nothing comes back before it.
  const Clock::time_point again = Clock::now();
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 0, iovs[0], 9)), 0);
  std::vector<IoCompletion> out;
  while (out.empty() && Clock::now() - again < std::chrono::seconds(30)) {
    ASSERT_GE(engine_->Run(/*wait=*/false, out), 0);
    if (out.empty()) owner.WaitAndRoute(microseconds(100));
  }
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 9u);
  EXPECT_GE(Clock::now() - again, microseconds(20'000))
      << "a completion came before its delay";
}

// A borrower that spins toward a release on the owner's thread stops for
// the owner's other work (RingLender::HasWaitingCompletions). An owner that
// always has some, and so never lets it spin, still gets every completion,
// none before its delay, and is woken for each: the engine leaves a
// timeout on the ring when it stops spinning early.
TEST_P(LentRingDelayTest, AnOwnerWithOtherWorkIsNotHeldBackNorStalled) {
  if (std::string skip = SetUpDelayedEngine(CompletionDelay{2'000, 2'000});
      !skip.empty()) {
    GTEST_SKIP() << skip;
  }
  owner.busy = true;

  AlignedBuffer data(4 * 512);
  std::memset(data.data(), 'y', data.size());
  for (uint64_t round = 0; round < 20; ++round) {
    std::vector<std::vector<iovec>> iovs;
    for (uint64_t i = 0; i < 4; ++i) {
      iovs.push_back({{data.data() + i * 512, 512}});
    }
    const Clock::time_point queued = Clock::now();
    for (uint64_t i = 0; i < 4; ++i) {
      ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, i * 512, iovs[i], 1 + i)), 0);
    }
    std::vector<IoCompletion> done;
    // The owner's loop: its waits end early and often (every 5 us at the
    // most), as a busy FUSE queue thread's do, so that it looks at the
    // engine inside the margin before the release, where a spin would be.
    while (done.size() < 4 &&
           Clock::now() - queued < std::chrono::seconds(10)) {
      std::vector<IoCompletion> out;
      ASSERT_GE(engine_->Run(/*wait=*/false, out), 0);
      for (const IoCompletion& c : out) {
        EXPECT_GE(Clock::now() - queued, microseconds(2'000))
            << "tag " << c.tag << " came before its delay";
        EXPECT_EQ(c.result, 512);
        done.push_back(c);
      }
      if (done.size() < 4) owner.WaitAndRoute(microseconds(5));
    }
    ASSERT_EQ(done.size(), 4u) << "round " << round;
  }
  EXPECT_EQ(engine_->inflight(), 0u);
  // Whether a look fell inside the margin depends on the machine's timing:
  // said, not asserted.
  std::printf("engine asked for the owner's work %d times\n",
              owner.waiting_asked);
}

// An owner whose loop sleeps until the ring wakes it, always with other
// work waiting: the timeout the engine leaves when it stops spinning early
// must still wake it for the release.
TEST_P(LentRingDelayTest, AStoppedSpinLeavesATimeoutForTheRelease) {
  if (std::string skip = SetUpDelayedEngine(CompletionDelay{2'000, 2'000});
      !skip.empty()) {
    GTEST_SKIP() << skip;
  }
  owner.busy = true;

  AlignedBuffer data(512);
  std::vector<iovec> iov = {{data.data(), 512}};
  for (uint64_t round = 0; round < 50; ++round) {
    const Clock::time_point queued = Clock::now();
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 0, iov, 1)), 0);
    std::vector<IoCompletion> out;
    while (out.empty()) {
      ASSERT_GE(engine_->Run(/*wait=*/false, out), 0);
      if (out.empty()) {
        ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)))
            << "round " << round << ": nothing on the ring woke the owner";
      }
    }
    EXPECT_GE(Clock::now() - queued, microseconds(2'000));
  }
}

// The owner's round answers what a look released and commits the replies
// at its end; a second look in the same round (BackendLoop::RunRound's
// next pass) must not spin toward the next release, which would hold those
// replies until then. Two batches 20 us apart (reads at 500 us, writes at
// 520 us: more than the batch slack of D/32 apart, within the spin margin
// of at least 20 us): right after the first comes back, a look returns
// nothing; the timeout it leaves brings the owner back for the second.
TEST_P(LentRingDelayTest, ALookRightAfterAReleaseLeavesTheNextToTheRing) {
  if (std::string skip = SetUpDelayedEngine(CompletionDelay{500, 520});
      !skip.empty()) {
    GTEST_SKIP() << skip;
  }
  AlignedBuffer data(2 * 512);
  std::memset(data.data(), 'z', data.size());
  std::vector<iovec> read_iov = {{data.data(), 512}};
  std::vector<iovec> write_iov = {{data.data() + 512, 512}};
  // A trial decides only if the second look began before the write was
  // due (one preempted or woken past that time finds it due, and a look
  // spins toward nothing already due).
  int decided = 0;
  for (int trial = 0; trial < 200 && decided < 3; ++trial) {
    const Clock::time_point queued = Clock::now();
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 0, read_iov, 1)), 0);
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kWrite, 512, write_iov, 2)), 0);
    std::vector<IoCompletion> out;
    while (out.empty()) {
      ASSERT_GE(engine_->Run(/*wait=*/false, out), 0);
      if (out.empty()) {
        ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)));
      }
    }
    // An owner woken later than the write's due time gets both at once
    // (the engine then learns a wider margin): that trial decides nothing.
    if (out.size() == 2) continue;
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].tag, 1u);
    // A spin toward a release asks the owner for other work on every turn
    // (RingLender::HasWaitingCompletions); a look that does not spin never
    // asks. With the write not yet due, a look that spun would ask here.
    const Clock::time_point second_look = Clock::now();
    const int asked = owner.waiting_asked;
    std::vector<IoCompletion> next;
    ASSERT_GE(engine_->Run(/*wait=*/false, next), 0);
    EXPECT_EQ(owner.waiting_asked, asked)
        << "trial " << trial << ": the look after a release spun toward "
        << "the next one";
    if (second_look - queued < microseconds(515)) ++decided;
    while (next.empty()) {
      ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)))
          << "trial " << trial << ": nothing on the ring woke the owner";
      ASSERT_GE(engine_->Run(/*wait=*/false, next), 0);
    }
    ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[0].tag, 2u);
    EXPECT_GE(Clock::now() - queued, microseconds(520));
  }
  EXPECT_EQ(engine_->inflight(), 0u);
  if (decided == 0) {
    GTEST_SKIP() << "in 200 trials the owner never looked again before the "
                    "second batch was due (a machine too loaded to tell)";
  }
}

// RingTimer's lateness is that of a sleep that ended by its time: a
// timeout queued for a time already past (the delay model asks for one
// when it stops spinning early) says nothing of wake-ups.
TEST(RingTimerTest, OnlyATimeoutForAFutureTimeMeasuresLateness) {
  OwnedRing owner;
  if (!owner.ok()) GTEST_SKIP() << "io_uring unavailable";
  RingTimer timer(&owner);
  ASSERT_TRUE(timer.WakeBy(MonotonicNowNs() - 1'000'000));
  ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)));
  EXPECT_EQ(timer.TakeLateness(), -1);
  const int64_t due = MonotonicNowNs() + 1'000'000;
  ASSERT_TRUE(timer.WakeBy(due));
  ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)));
  EXPECT_GE(MonotonicNowNs(), due);
  EXPECT_GE(timer.TakeLateness(), 0);
  EXPECT_EQ(timer.TakeLateness(), -1);  // taken
}

// TakeFired says that a timeout completed, whatever its time: the delay
// model tells a round its timeout brought from the same round's next pass.
TEST(RingTimerTest, TakeFiredSaysOnceThatATimeoutCompleted) {
  OwnedRing owner;
  if (!owner.ok()) GTEST_SKIP() << "io_uring unavailable";
  RingTimer timer(&owner);
  EXPECT_FALSE(timer.TakeFired());
  ASSERT_TRUE(timer.WakeBy(MonotonicNowNs() - 1'000'000));  // already past
  ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)));
  EXPECT_TRUE(timer.TakeFired());
  EXPECT_FALSE(timer.TakeFired());  // taken
  ASSERT_TRUE(timer.WakeBy(MonotonicNowNs() + 200'000));
  ASSERT_TRUE(owner.WaitAndRoute(std::chrono::seconds(10)));
  EXPECT_TRUE(timer.TakeFired());
}

INSTANTIATE_TEST_SUITE_P(Engines, LentRingDelayTest,
                         ::testing::Values(EngineKind::kUring,
                                           EngineKind::kSync,
                                           EngineKind::kNull),
                         KindName);

}  // namespace
}  // namespace pvdisk::io::testing
