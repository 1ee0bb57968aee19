// The delay decorator (`--disk IMG,delay=US[,delay-write=US]`) over real
// uring, sync and null engines: completions are held until their due time
// (never returned early), in due order (exactly so over the null engine,
// which answers at once), with results and errors unchanged;
// refusals and wake-ups pass through; and neither Run() nor destruction
// hangs with nothing to wait for or with completions still held.
//
// The only timed checks are lower bounds (a completion never comes before
// its delay), which load on the machine cannot break.
#include "io/delay_engine.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "io/deadline.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

constexpr uint32_t kReadDelayUs = 30'000;
constexpr uint32_t kWriteDelayUs = 10'000;

std::string KindName(const ::testing::TestParamInfo<EngineKind>& info) {
  return std::string(EngineKindName(info.param));
}

class DelayEngineTest : public EngineFixture,
                        public ::testing::TestWithParam<EngineKind> {
 protected:
  // An engine of the test's kind with `delay`, and optionally an EIO range.
  void MakeEngine(CompletionDelay delay,
                  std::optional<FaultRange> fault = std::nullopt) {
    EngineOptions options;
    options.kind = GetParam();
    options.depth = 16;
    options.delay = delay;
    options.fault = fault;
    std::string skip_reason;
    SetUpEngine(options, skip_reason);
    if (!skip_reason.empty()) GTEST_SKIP() << skip_reason;
  }

  bool does_io() const { return GetParam() != EngineKind::kNull; }
};

TEST_P(DelayEngineTest, HoldsACompletionUntilItsDelayHasPassed) {
  MakeEngine({kReadDelayUs, kWriteDelayUs});
  if (engine_ == nullptr) return;
  EXPECT_EQ(engine_->name(), EngineKindName(GetParam()));
  EXPECT_NE(engine_->mode().find("completions held 30000 us after submission "
                                 "(writes 10000 us)"),
            std::string_view::npos)
      << engine_->mode();

  AlignedBuffer data(4096);
  std::vector<iovec> iov = {{data.data(), data.size()}};
  const Clock::time_point queued = Clock::now();
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 0, iov, 7)), 0);
  // Finished by the inner engine at once or soon, but not returned: a
  // non-blocking Run() right away has nothing, and the request still
  // counts as in flight.
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/false, out), 0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(engine_->inflight(), 1u);

  std::vector<IoCompletion> done = Collect(*engine_, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_GE(Clock::now() - queued, microseconds(kReadDelayUs));
  EXPECT_EQ(done[0].tag, 7u);
  EXPECT_EQ(done[0].result, 4096);
  EXPECT_EQ(engine_->inflight(), 0u);
}

TEST_P(DelayEngineTest, ReturnsInDueOrderAndQueueOrderAmongEquals) {
  MakeEngine({kReadDelayUs, kWriteDelayUs});
  if (engine_ == nullptr) return;
  AlignedBuffer data(8 * 512);
  std::memset(data.data(), 'w', data.size());
  std::vector<std::vector<iovec>> iovs;
  for (int i = 0; i < 8; ++i) {
    iovs.push_back({{data.data() + i * 512, 512}});
  }
  // Reads 1..4 and writes 5..8, interleaved; all due after their delay.
  const Clock::time_point queued = Clock::now();
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, i * 512, iovs[i], 1 + i)), 0);
    ASSERT_EQ(
        engine_->Queue(Rw(IoOp::kWrite, (4 + i) * 512, iovs[4 + i], 5 + i)), 0);
  }
  EXPECT_EQ(engine_->inflight(), 8u);
  std::vector<IoCompletion> done = Collect(*engine_, 8);
  ASSERT_EQ(done.size(), 8u);
  EXPECT_GE(Clock::now() - queued, microseconds(kReadDelayUs));
  // The writes (10 ms) were queued after the first read but are due first;
  // within each kind the queue order holds. The order is the delay
  // engine's own (a heap of held completions by due time, then queue
  // order), whatever the inner engine, so it is checked exactly where the
  // inner engine answers at once (null). An engine doing real I/O may
  // answer a request after its due time, and the delay engine can only
  // return it then: in CI (four tests at a time) write 6 came back after
  // writes 7 and 8. There every request must still come back, once.
  const std::vector<uint64_t> expected = {5, 6, 7, 8, 1, 2, 3, 4};
  std::vector<uint64_t> tags;
  for (size_t i = 0; i < done.size(); ++i) {
    tags.push_back(done[i].tag);
    EXPECT_EQ(done[i].result, 512) << i;
  }
  if (does_io()) {
    std::sort(tags.begin(), tags.end());
    EXPECT_EQ(tags, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  } else {
    EXPECT_EQ(tags, expected);
  }
  // The writes really reached the image.
  if (does_io()) {
    EXPECT_EQ(ReadFileRange(image_path_, 2048, 2048), std::string(2048, 'w'));
  }
}

TEST_P(DelayEngineTest, ErrorsTakeTheDelayAndRefusalsDoNot) {
  MakeEngine({kWriteDelayUs, kWriteDelayUs}, FaultRange{8, 8});
  if (engine_ == nullptr) return;
  AlignedBuffer data(4096);
  std::vector<iovec> iov = {{data.data(), data.size()}};

  // An I/O error is a completion like any other: held, then returned as is.
  const Clock::time_point queued = Clock::now();
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, 4096, iov, 3)), -EIO);
  EXPECT_GE(Clock::now() - queued, microseconds(kWriteDelayUs));

  // A refused request has no completion to hold: refused at once, and
  // nothing counts as in flight.
  EXPECT_EQ(engine_->Queue(Rw(IoOp::kRead, kImageBytes, iov, 4)), -EINVAL);
  EXPECT_EQ(engine_->inflight(), 0u);
  EXPECT_EQ(Do(*engine_, Range(IoOp::kFlush, 0, 0, 5)), 0);
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kWrite, 0, iov, 6)), 4096);
}

TEST_P(DelayEngineTest, WakeUpsPassThroughAndDestructionDropsHeldOnes) {
  // A delay far longer than the test: what is held is never due.
  MakeEngine({kMaxDelayUs, kMaxDelayUs});
  if (engine_ == nullptr) return;
  int fd = eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 42).ok());

  AlignedBuffer data(512);
  std::vector<iovec> iov = {{data.data(), data.size()}};
  for (uint64_t tag = 1; tag <= 4; ++tag) {
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, tag * 512, iov, tag)), 0);
  }
  uint64_t one = 1;
  ASSERT_EQ(write(fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  // The kick comes back under the caller's tag while the I/O stays held.
  std::vector<IoCompletion> out;
  ASSERT_EQ(engine_->Run(/*wait=*/true, out), 1);
  EXPECT_TRUE(out[0].wake);
  EXPECT_EQ(out[0].tag, 42u);
  EXPECT_EQ(engine_->inflight(), 4u);

  // Destroying it with four completions held must not wait ten seconds for
  // them (a hang here fails on ctest's timeout; the bound below says why).
  const Clock::time_point before = Clock::now();
  engine_.reset();
  EXPECT_LT(Clock::now() - before, std::chrono::seconds(5));
  close(fd);
}

TEST_P(DelayEngineTest, RunWithNothingToWaitForReturns) {
  MakeEngine({kWriteDelayUs, kWriteDelayUs});
  if (engine_ == nullptr) return;
  // No request, no watched fd: a blocking Run() has nothing that could
  // ever end it, so it returns 0 rather than hang (as the null engine
  // does).
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/true, out), 0);
  EXPECT_TRUE(out.empty());
  // And after a completion has been returned, again.
  AlignedBuffer data(512);
  std::vector<iovec> iov = {{data.data(), data.size()}};
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, 0, iov, 9)), 512);
  EXPECT_EQ(engine_->Run(/*wait=*/true, out), 0);
}

TEST_P(DelayEngineTest, ManyRequestsAtFullDepth) {
  MakeEngine({kWriteDelayUs, kWriteDelayUs});
  if (engine_ == nullptr) return;
  // Three rounds of 16 (the depth), so that every pending slot is reused.
  AlignedBuffer data(16 * 512);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<iovec>> iovs;
    for (uint64_t i = 0; i < 16; ++i) {
      iovs.push_back({{data.data() + i * 512, 512}});
      ASSERT_EQ(engine_->Queue(
                    Rw(IoOp::kRead, i * 512, iovs.back(), 100 * round + i)),
                0);
    }
    EXPECT_EQ(engine_->inflight(), 16u);
    std::vector<IoCompletion> done = Collect(*engine_, 16);
    ASSERT_EQ(done.size(), 16u);
    for (uint64_t i = 0; i < 16; ++i) {
      EXPECT_EQ(done[i].tag, 100 * round + i);
      EXPECT_EQ(done[i].result, 512);
    }
  }
}

TEST_P(DelayEngineTest, CompletionsDueCloseTogetherComeBackTogether) {
  // 192 ms: completions due within 6 ms (1/32 of it) of the first of a
  // batch come back with it, at the latest due time among them.
  constexpr uint32_t kDelayUs = 192'000;
  constexpr int64_t kSlackNs = 6'000'000;
  MakeEngine({kDelayUs, kDelayUs});
  if (engine_ == nullptr) return;
  AlignedBuffer data(3 * 512);
  std::vector<std::vector<iovec>> iovs;
  for (int i = 0; i < 3; ++i) iovs.push_back({{data.data() + i * 512, 512}});
  // A (tag 0), B (tag 1) 4 ms later, C (tag 2) 20 ms after B: A and B due
  // within the slack of each other (if the machine kept the spacing), C
  // well outside it.
  int64_t queued_ns[3];
  const auto queue = [&](uint64_t tag) {
    queued_ns[tag] = MonotonicNowNs();
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, tag * 512, iovs[tag], tag)), 0);
  };
  queue(0);
  usleep(4000);
  queue(1);
  const int64_t spacing_ab = MonotonicNowNs() - queued_ns[0];
  usleep(20'000);
  queue(2);

  // Which Run() returned each, and none before its own due time. The
  // caller looks often (every ~100 us, as a driver whose rounds come for
  // other reasons), so a batch released before its last member is due
  // would be seen.
  int round_of[3] = {-1, -1, -1};
  std::vector<int64_t> called_ns;  // when each round's Run() was called
  size_t back = 0;
  const int64_t give_up = MonotonicNowNs() + 30'000'000'000;
  for (int round = 0; back < 3 && MonotonicNowNs() < give_up; ++round) {
    std::vector<IoCompletion> out;
    called_ns.push_back(MonotonicNowNs());
    ASSERT_GE(engine_->Run(/*wait=*/false, out), 0);
    if (out.empty()) usleep(100);
    const int64_t now = MonotonicNowNs();
    for (const IoCompletion& c : out) {
      ASSERT_LT(c.tag, 3u);
      EXPECT_EQ(c.result, 512);
      EXPECT_GE(now - queued_ns[c.tag], int64_t{kDelayUs} * 1000)
          << "tag " << c.tag << " came before its delay";
      round_of[c.tag] = round;
      ++back;
    }
  }
  ASSERT_EQ(back, 3u);
  EXPECT_EQ(engine_->inflight(), 0u);
  // Grouping is exact where the inner engine answers at once (null); with
  // real I/O a completion may reach the delay engine after its batch left.
  if (does_io()) return;
  // C must not hold B back: a round called once B was due and before C was
  // (and C not within the slack of it) must have returned B. Judged only
  // if such a round came: a test thread kept off the CPU for that whole
  // 20 ms window (a loaded machine) calls Run() next when all three are
  // due, and then releasing them together is right.
  const int64_t b_due_ns = queued_ns[1] + int64_t{kDelayUs} * 1000;
  const int64_t c_due_ns = queued_ns[2] + int64_t{kDelayUs} * 1000;
  int judged_round = -1;
  for (size_t r = 0; r < called_ns.size(); ++r) {
    if (called_ns[r] >= b_due_ns && called_ns[r] < c_due_ns - kSlackNs) {
      judged_round = static_cast<int>(r);
      break;
    }
  }
  if (judged_round >= 0) {
    EXPECT_LE(round_of[1], judged_round)
        << "B, due before round " << judged_round << ", was held back";
    EXPECT_LT(round_of[1], round_of[2]) << "C was held back with A and B";
  } else {
    std::cout << "no round between B's and C's due times: not judged\n";
  }
  if (spacing_ab < kSlackNs) {
    EXPECT_EQ(round_of[0], round_of[1])
        << "A and B, due " << spacing_ab << " ns apart, came back apart";
  }
}

TEST_P(DelayEngineTest, RunUntilEndsAtItsDeadlineWithoutReleasingEarly) {
  MakeEngine({kReadDelayUs, kReadDelayUs});
  if (engine_ == nullptr) return;
  // Nothing at all to wait for: the wait still lasts until the deadline.
  std::vector<IoCompletion> out;
  Clock::time_point start = Clock::now();
  EXPECT_EQ(engine_->RunUntil(MonotonicNowNs() + 2'000'000, out), 0);
  EXPECT_GE(Clock::now() - start, microseconds(2000));
  EXPECT_TRUE(out.empty());

  AlignedBuffer data(512);
  std::vector<iovec> iov = {{data.data(), data.size()}};
  const int64_t queued_ns = MonotonicNowNs();
  const Clock::time_point queued = Clock::now();
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 0, iov, 3)), 0);
  // A deadline half a millisecond before the due time ends the wait with
  // nothing returned, unless the thread came back only after the due time.
  const int early = engine_->RunUntil(
      queued_ns + int64_t{kReadDelayUs} * 1000 - 500'000, out);
  ASSERT_GE(early, 0);
  if (early > 0) {
    EXPECT_GE(Clock::now() - queued, microseconds(kReadDelayUs))
        << "a completion came before its delay";
  } else {
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(engine_->inflight(), 1u);
  }
  // One after it returns the completion once it is due, not later than
  // needed: the wait ends at the due time, well before the deadline.
  const int64_t far = MonotonicNowNs() + 60'000'000'000;
  int got = early;
  while (got == 0 && MonotonicNowNs() < far) {
    got = engine_->RunUntil(far, out);
  }
  EXPECT_EQ(got, 1);
  EXPECT_GE(Clock::now() - queued, microseconds(kReadDelayUs));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 3u);
  EXPECT_EQ(engine_->inflight(), 0u);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, DelayEngineTest,
                         ::testing::Values(EngineKind::kUring,
                                           EngineKind::kSync,
                                           EngineKind::kNull),
                         KindName);

// RunUntil() of the bare engines, which the delay model sleeps in: with
// nothing to wait for it sleeps (not spins) until the deadline; with a
// completion it returns it without waiting for the deadline.
class RunUntilTest : public EngineFixture,
                     public ::testing::TestWithParam<EngineKind> {};

// CPU time this thread has used.
microseconds ThreadCpuTime() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return microseconds(int64_t{now.tv_sec} * 1'000'000 + now.tv_nsec / 1000);
}

TEST_P(RunUntilTest, SleepsUntilTheDeadlineOrReturnsWhatCompleted) {
  EngineOptions options;
  options.kind = GetParam();
  options.depth = 4;
  std::string skip_reason;
  SetUpEngine(options, skip_reason);
  if (!skip_reason.empty()) GTEST_SKIP() << skip_reason;
  if (engine_ == nullptr) return;
  std::vector<IoCompletion> out;
  const Clock::time_point start = Clock::now();
  const microseconds cpu_before = ThreadCpuTime();
  EXPECT_EQ(engine_->RunUntil(MonotonicNowNs() + 20'000'000, out), 0);
  EXPECT_GE(Clock::now() - start, microseconds(20'000));
  EXPECT_LT(ThreadCpuTime() - cpu_before, microseconds(10'000))
      << "the wait spun instead of sleeping";
  EXPECT_TRUE(out.empty());

  AlignedBuffer data(512);
  std::vector<iovec> iov = {{data.data(), data.size()}};
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 0, iov, 4)), 0);
  const Clock::time_point queued = Clock::now();
  int got = 0;
  while (got == 0 && Clock::now() - queued < std::chrono::seconds(60)) {
    got = engine_->RunUntil(MonotonicNowNs() + 60'000'000'000, out);
  }
  EXPECT_EQ(got, 1);
  EXPECT_LT(Clock::now() - queued, std::chrono::seconds(30));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 4u);
  EXPECT_EQ(out[0].result, 512);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, RunUntilTest,
                         ::testing::Values(EngineKind::kUring,
                                           EngineKind::kSync,
                                           EngineKind::kNull),
                         KindName);

TEST(DelayOptionsTest, OutOfRangeDelayIsRefused) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  ASSERT_TRUE(CreateImage(path, kImageBytes, false).ok());
  auto image = ImageFile::Open(path, /*read_only=*/false,
                               /*want_direct=*/false);
  ASSERT_TRUE(image.ok()) << image.status();
  EngineOptions options;
  options.kind = EngineKind::kNull;
  options.delay = CompletionDelay{10, kMaxDelayUs + 1};
  auto engine = CreateEngine(options, **image);
  ASSERT_FALSE(engine.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(engine.status())) << engine.status();
  EXPECT_NE(engine.status().message().find("0 to 10000000"),
            std::string_view::npos)
      << engine.status();
  // A zero delay is no delay: no decorator, the inner engine's own mode.
  options.delay = CompletionDelay{0, 0};
  engine = CreateEngine(options, **image);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->mode(), "no I/O");
}

}  // namespace
}  // namespace pvdisk::io::testing
