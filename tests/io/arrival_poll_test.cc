// ArrivalPoll, the delay model's spin for the next request after a
// release (io/arrival_poll.h): when it asks for a spin, how long, and how
// the gaps it sees move that. Pure: the clock is passed in.
#include "io/arrival_poll.h"

#include "gtest/gtest.h"

namespace pvdisk::io {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kStart = 1'000'000'000;  // any time after 0

TEST(ArrivalPollTest, NoSpinBeforeAReleaseOrWhileNothingIsHeld) {
  ArrivalPoll poll;
  EXPECT_EQ(poll.SpinUntilNs(kStart, /*holding=*/true), 0);
  poll.Released(kStart);
  // Nothing held: no submitter waits for an answer, the mount may be idle.
  EXPECT_EQ(poll.SpinUntilNs(kStart + 1 * kUs, /*holding=*/false), 0);
  EXPECT_GT(poll.SpinUntilNs(kStart + 1 * kUs, /*holding=*/true), 0);
}

TEST(ArrivalPollTest, SpinsForTheWindowAfterEachRelease) {
  ArrivalPoll poll;
  poll.Released(kStart);
  const int64_t window = ArrivalPoll::kInitialGapNs + ArrivalPoll::kSlackNs;
  EXPECT_EQ(poll.WindowNs(), window);
  EXPECT_EQ(poll.SpinUntilNs(kStart, true), kStart + window);
  EXPECT_EQ(poll.SpinUntilNs(kStart + window - 1, true), kStart + window);
  EXPECT_EQ(poll.SpinUntilNs(kStart + window, true), 0);
  // The next release opens the next window.
  poll.Released(kStart + 500 * kUs);
  EXPECT_EQ(poll.SpinUntilNs(kStart + 501 * kUs, true),
            kStart + 500 * kUs + window);
}

TEST(ArrivalPollTest, LearnsTheGapUpFastAndDownSlowly) {
  ArrivalPoll poll;
  int64_t now = kStart;
  // Arrivals 100 us after each release: the gap rises by half the
  // difference per arrival.
  poll.Released(now);
  poll.Arrived(now + 100 * kUs);
  EXPECT_EQ(poll.gap_ns(), (ArrivalPoll::kInitialGapNs + 100 * kUs) / 2);
  for (int i = 0; i < 20; ++i) {
    now += 1'000 * kUs;
    poll.Released(now);
    poll.Arrived(now + 100 * kUs);
  }
  EXPECT_NEAR(poll.gap_ns(), 100 * kUs, 1 * kUs);
  EXPECT_EQ(poll.WindowNs(), poll.gap_ns() + ArrivalPoll::kSlackNs);
  // Then 20 us gaps: down by 1/64 of the difference per arrival.
  const int64_t before = poll.gap_ns();
  now += 1'000 * kUs;
  poll.Released(now);
  poll.Arrived(now + 20 * kUs);
  EXPECT_EQ(poll.gap_ns(), before + (20 * kUs - before) / 64);
}

TEST(ArrivalPollTest, OnlyTheFirstArrivalAfterAReleaseCounts) {
  ArrivalPoll poll;
  poll.Released(kStart);
  poll.Arrived(kStart + 40 * kUs);
  const int64_t gap = poll.gap_ns();
  // Later ones of the same round (and any with no release before) do not.
  poll.Arrived(kStart + 140 * kUs);
  poll.Arrived(kStart + 900 * kUs);
  EXPECT_EQ(poll.gap_ns(), gap);
}

TEST(ArrivalPollTest, GapsLongerThanTheLongestSpinTurnItOff) {
  ArrivalPoll poll;
  int64_t now = kStart;
  for (int i = 0; i < 8; ++i) {
    now += 2'000 * kUs;
    poll.Released(now);
    poll.Arrived(now + ArrivalPoll::kMaxWindowNs + 100 * kUs);
  }
  EXPECT_EQ(poll.WindowNs(), 0);
  poll.Released(now + 3'000 * kUs);
  EXPECT_EQ(poll.SpinUntilNs(now + 3'001 * kUs, true), 0);
  // Short gaps bring it back, slowly.
  int rounds = 0;
  while (poll.WindowNs() == 0 && rounds < 10'000) {
    now += 2'000 * kUs;
    poll.Released(now);
    poll.Arrived(now + 20 * kUs);
    ++rounds;
  }
  EXPECT_GT(rounds, 8);
  EXPECT_LT(rounds, 200);
  EXPECT_LE(poll.WindowNs(), ArrivalPoll::kMaxWindowNs);
}

TEST(ArrivalPollTest, AnArrivalBeforeItsReleaseTeachesNothing) {
  ArrivalPoll poll;
  poll.Released(kStart);
  poll.Arrived(kStart - 5 * kUs);  // clocks read on the same thread: never,
  EXPECT_EQ(poll.gap_ns(), ArrivalPoll::kInitialGapNs);  // but harmless
}

}  // namespace
}  // namespace pvdisk::io
