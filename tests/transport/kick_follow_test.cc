// KickFollow: where the backend thread runs, as a pure decision; and
// EventFd's note of where its latest signal came from.
#include "transport/kick_follow.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <memory>
#include <thread>

#include "transport/event_fd.h"

namespace pvdisk::transport {
namespace {

constexpr int kAny = KickFollow::kAnyCpu;

// Feeds `n` rounds that each saw a kick from `cpu`; returns how many of
// them changed the decision.
int Kicks(KickFollow& follow, int cpu, unsigned n, bool one_at_a_time = true) {
  int changes = 0;
  for (unsigned i = 0; i < n; ++i) changes += follow.Round(one_at_a_time, cpu);
  return changes;
}

TEST(KickFollowTest, StartsAnywhere) {
  KickFollow follow;
  EXPECT_EQ(follow.cpu(), kAny);
}

TEST(KickFollowTest, FollowsAStreakOfKicksFromOneCpu) {
  KickFollow follow;
  EXPECT_EQ(Kicks(follow, 1, KickFollow::kStreak - 1), 0);
  EXPECT_EQ(follow.cpu(), kAny);
  EXPECT_TRUE(follow.Round(true, 1));
  EXPECT_EQ(follow.cpu(), 1);
  // More of the same change nothing.
  EXPECT_EQ(Kicks(follow, 1, 3 * KickFollow::kStreak), 0);
  EXPECT_EQ(follow.cpu(), 1);
}

TEST(KickFollowTest, RoundsWithoutAKickNeitherCountNorBreakTheStreak) {
  KickFollow follow;
  for (unsigned i = 0; i + 1 < KickFollow::kStreak; ++i) {
    EXPECT_FALSE(follow.Round(true, 0));
    EXPECT_FALSE(follow.Round(true, kAny));  // a wake-up that was no kick
  }
  EXPECT_EQ(follow.cpu(), kAny);
  EXPECT_TRUE(follow.Round(true, 0));
  EXPECT_EQ(follow.cpu(), 0);
}

TEST(KickFollowTest, KicksTakingTurnsBetweenCpusAreNotFollowed) {
  KickFollow follow;
  for (unsigned i = 0; i < 4 * KickFollow::kStreak; ++i) {
    EXPECT_FALSE(follow.Round(true, static_cast<int>(i % 2)));
  }
  EXPECT_EQ(follow.cpu(), kAny);
}

TEST(KickFollowTest, MovesToANewCpuOnlyAfterAFullStreakThere) {
  KickFollow follow;
  Kicks(follow, 0, KickFollow::kStreak);
  ASSERT_EQ(follow.cpu(), 0);
  // The caller moved: the backend stays until the new CPU has a streak.
  EXPECT_EQ(Kicks(follow, 1, KickFollow::kStreak - 1), 0);
  EXPECT_EQ(follow.cpu(), 0);
  // A kick from the old CPU restarts the count.
  EXPECT_FALSE(follow.Round(true, 0));
  EXPECT_EQ(Kicks(follow, 1, KickFollow::kStreak - 1), 0);
  EXPECT_EQ(follow.cpu(), 0);
  EXPECT_TRUE(follow.Round(true, 1));
  EXPECT_EQ(follow.cpu(), 1);
}

TEST(KickFollowTest, DepthLetsTheBackendGoAtOnce) {
  KickFollow follow;
  Kicks(follow, 1, KickFollow::kStreak);
  ASSERT_EQ(follow.cpu(), 1);
  EXPECT_TRUE(follow.Round(false, 1));
  EXPECT_EQ(follow.cpu(), kAny);
  // Kicks at depth do not count towards a streak.
  EXPECT_EQ(Kicks(follow, 1, 3 * KickFollow::kStreak, /*one_at_a_time=*/false),
            0);
  EXPECT_EQ(follow.cpu(), kAny);
  // Back to one at a time: a fresh streak is needed.
  EXPECT_EQ(Kicks(follow, 1, KickFollow::kStreak - 1), 0);
  EXPECT_EQ(follow.cpu(), kAny);
  EXPECT_TRUE(follow.Round(true, 1));
  EXPECT_EQ(follow.cpu(), 1);
}

TEST(KickFollowTest, AStreakBrokenByDepthStartsOver) {
  KickFollow follow;
  Kicks(follow, 0, KickFollow::kStreak - 1);
  EXPECT_FALSE(follow.Round(false, 0));
  EXPECT_EQ(Kicks(follow, 0, KickFollow::kStreak - 1), 0);
  EXPECT_EQ(follow.cpu(), kAny);
}

TEST(EventFdSourceTest, NotesTheCpuEverySignalCameFrom) {
  absl::StatusOr<std::unique_ptr<EventFd>> made = EventFd::Create();
  ASSERT_TRUE(made.ok());
  EventFd& fd = **made;
  EXPECT_EQ(fd.LastSignal().count, 0u);
  EXPECT_EQ(fd.LastSignal().cpu, -1);
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  uint32_t signals = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && signals < 4; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    // Signalled from a thread held on `cpu`.
    std::thread([&fd, cpu] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
      fd.Signal();
    }).join();
    ++signals;
    EXPECT_EQ(fd.LastSignal().count, signals);
    EXPECT_EQ(fd.LastSignal().cpu, cpu);
  }
  EXPECT_EQ(fd.Wait(), signals);  // the eventfd itself counted them all
}

}  // namespace
}  // namespace pvdisk::transport
