// --fuse-queue-pin: parsing, the auto policy, and the CPUs it gives the
// calling thread.
#include "fuse/channel/queue_affinity.h"

#include <sched.h>

#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace pvdisk::fuse::channel {
namespace {

TEST(QueuePinTest, ParsesItsThreeValuesAndNamesThem) {
  for (QueuePin pin : {QueuePin::kAuto, QueuePin::kOn, QueuePin::kOff}) {
    absl::StatusOr<QueuePin> parsed = ParseQueuePin(QueuePinName(pin));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, pin);
  }
  absl::StatusOr<QueuePin> bad = ParseQueuePin("maybe");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()),
            "--fuse-queue-pin 'maybe' is not allowed: use auto, on or off");
}

// Feeds `rounds` rounds that each took `taken` requests; returns how many
// times the decision changed.
int Feed(AutoPin& policy, unsigned rounds, unsigned taken) {
  int changes = 0;
  for (unsigned i = 0; i < rounds; ++i) changes += policy.Round(taken) ? 1 : 0;
  return changes;
}

TEST(AutoPinTest, OneAtATimeStaysOnItsCpu) {
  AutoPin policy;
  EXPECT_TRUE(policy.on_own_cpu());
  EXPECT_EQ(Feed(policy, 10 * AutoPin::kWindow, 1), 0);
  EXPECT_TRUE(policy.on_own_cpu());
}

TEST(AutoPinTest, AFewRoundsOfTwoDoNotMoveIt) {
  // A caller at iodepth 1 opening and closing its file: a request beside
  // its I/O now and then, fewer than kDeepRounds rounds in any window.
  AutoPin policy;
  for (unsigned window = 0; window < 10; ++window) {
    EXPECT_EQ(Feed(policy, AutoPin::kDeepRounds - 1, 2), 0);
    EXPECT_EQ(Feed(policy, AutoPin::kWindow - AutoPin::kDeepRounds + 1, 1), 0);
  }
  EXPECT_TRUE(policy.on_own_cpu());
}

TEST(AutoPinTest, ADeepWindowMovesItAtItsEndAndCalmWindowsBringItBack) {
  AutoPin policy;
  EXPECT_EQ(Feed(policy, 10, 1), 0);
  EXPECT_EQ(Feed(policy, AutoPin::kDeepRounds, 2), 0);
  EXPECT_EQ(Feed(policy, AutoPin::kWindow - 11 - AutoPin::kDeepRounds, 1), 0);
  EXPECT_TRUE(policy.on_own_cpu());  // the window is not over yet
  EXPECT_TRUE(policy.Round(1));      // its last round
  EXPECT_FALSE(policy.on_own_cpu());
  // Deep rounds keep it off; kCalmWindows windows in a row that are not
  // deep bring it back, and not before; a deep window among them starts the
  // count again, and a window with a few rounds of two is still calm.
  EXPECT_EQ(Feed(policy, 3 * AutoPin::kWindow, 5), 0);
  const unsigned calm = AutoPin::kCalmWindows * AutoPin::kWindow;
  const unsigned half = AutoPin::kWindow / 2;
  EXPECT_EQ(Feed(policy, calm - half, 1), 0);  // calm windows and a half
  EXPECT_EQ(Feed(policy, AutoPin::kDeepRounds, 2), 0);  // this one is deep
  EXPECT_EQ(Feed(policy, half - AutoPin::kDeepRounds, 1), 0);
  EXPECT_EQ(Feed(policy, AutoPin::kDeepRounds - 1, 2), 0);  // not deep
  EXPECT_EQ(Feed(policy, calm - AutoPin::kDeepRounds, 1), 0);
  EXPECT_FALSE(policy.on_own_cpu());
  EXPECT_TRUE(policy.Round(1));
  EXPECT_TRUE(policy.on_own_cpu());
}

TEST(AutoPinTest, RoundsThatTookNothingDoNotCount) {
  AutoPin policy;
  EXPECT_EQ(Feed(policy, AutoPin::kWindow - 1, 3), 0);
  EXPECT_EQ(Feed(policy, 10 * AutoPin::kWindow, 0), 0);  // completions only
  EXPECT_TRUE(policy.on_own_cpu());
  EXPECT_TRUE(policy.Round(3));
  EXPECT_FALSE(policy.on_own_cpu());
}

// The CPUs the calling thread may run on, and how many the test may use.
cpu_set_t Allowed() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  EXPECT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  return cpus;
}

TEST(QueueAffinityTest, OnAndAutoStartOnTheQueuesCpuAutoLeavesItAtDepth) {
  const cpu_set_t all = Allowed();
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "needs two CPUs to choose from";
  int cpu = 0;
  while (!CPU_ISSET(cpu, &all)) ++cpu;
  std::thread([&] {
    {
      QueueAffinity on(QueuePin::kOn, cpu);
      cpu_set_t now = Allowed();
      EXPECT_EQ(CPU_COUNT(&now), 1);
      EXPECT_TRUE(CPU_ISSET(cpu, &now));
      for (unsigned i = 0; i < 4 * AutoPin::kWindow; ++i) on.Round(8);
      now = Allowed();
      EXPECT_EQ(CPU_COUNT(&now), 1);  // on never moves
    }
    ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
    QueueAffinity automatic(QueuePin::kAuto, cpu);
    cpu_set_t now = Allowed();
    EXPECT_EQ(CPU_COUNT(&now), 1);
    EXPECT_TRUE(CPU_ISSET(cpu, &now));
    for (unsigned i = 0; i < AutoPin::kWindow; ++i) automatic.Round(8);
    now = Allowed();
    // Every allowed CPU but the queue's.
    EXPECT_EQ(CPU_COUNT(&now), CPU_COUNT(&all) - 1);
    EXPECT_FALSE(CPU_ISSET(cpu, &now));
    for (unsigned i = 0; i < AutoPin::kCalmWindows * AutoPin::kWindow; ++i) {
      automatic.Round(1);
    }
    now = Allowed();
    EXPECT_EQ(CPU_COUNT(&now), 1);
    EXPECT_TRUE(CPU_ISSET(cpu, &now));
  }).join();
}

TEST(QueueAffinityTest, OffLeavesTheThreadAlone) {
  const cpu_set_t all = Allowed();
  std::thread([&] {
    QueueAffinity off(QueuePin::kOff, 0);
    for (unsigned i = 0; i < 4 * AutoPin::kWindow; ++i) off.Round(8);
    cpu_set_t now = Allowed();
    EXPECT_TRUE(CPU_EQUAL(&now, &all));
  }).join();
}

TEST(QueueAffinityTest, AQueueCpuOutsideTheAllowedSetLeavesTheThreadThere) {
  const cpu_set_t all = Allowed();
  int outside = 0;
  while (outside < CPU_SETSIZE && CPU_ISSET(outside, &all)) ++outside;
  if (outside == CPU_SETSIZE) GTEST_SKIP() << "every CPU is allowed";
  std::thread([&] {
    QueueAffinity automatic(QueuePin::kAuto, outside);
    cpu_set_t now = Allowed();
    EXPECT_TRUE(CPU_EQUAL(&now, &all));  // own set empty: not moved
    for (unsigned i = 0; i < AutoPin::kWindow; ++i) automatic.Round(8);
    now = Allowed();
    EXPECT_TRUE(CPU_EQUAL(&now, &all));  // the others are all of them
  }).join();
}

TEST(AutoPinTest, ADeeperThresholdMovesItOnlyForThatMany) {
  // Under a delay model (fuse::AutoPinDeepAt): rounds that held fewer than
  // `deep_at` at once are calm however many windows of them come.
  AutoPin policy(32);
  EXPECT_EQ(Feed(policy, 10 * AutoPin::kWindow, 31), 0);
  EXPECT_TRUE(policy.on_own_cpu());
  EXPECT_EQ(Feed(policy, AutoPin::kWindow, 32), 1);
  EXPECT_FALSE(policy.on_own_cpu());
}

}  // namespace
}  // namespace pvdisk::fuse::channel
