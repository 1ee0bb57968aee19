// SpreadTarget and SpreadUnits (fuse/channel/spread_policy.h): which queue
// thread commits a reply its holder makes, from what the holder holds.
#include "fuse/channel/spread_policy.h"

#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::fuse::channel {
namespace {

SpreadState AtHome(uint32_t queues, uint32_t held, uint32_t units) {
  SpreadState state;
  state.queues = queues;
  state.holder = 1;
  state.owner = 1;
  state.with_handler = held;
  state.held_units = units;
  return state;
}

TEST(SpreadPolicyTest, ARequestWeighsOnePlusOnePerWhole4KiBItBrings) {
  EXPECT_EQ(SpreadUnits(0), 1u);  // a read
  EXPECT_EQ(SpreadUnits(4095), 1u);
  EXPECT_EQ(SpreadUnits(4096), 2u);  // a 4 KiB write: 8 of them spread
  EXPECT_EQ(SpreadUnits(28 << 10), 8u);
  EXPECT_EQ(SpreadUnits(1 << 20), 257u);
}

TEST(SpreadPolicyTest, BelowDepthEveryReplyStaysOnItsHolder) {
  uint32_t turn = 0;
  // One request, however heavy; or many weighing less than kSpreadDepth.
  EXPECT_EQ(SpreadTarget(AtHome(4, 1, 257), &turn), kKeep);
  EXPECT_EQ(SpreadTarget(AtHome(4, 15, kSpreadDepth - 1), &turn), kKeep);
  EXPECT_EQ(turn, 0u);  // no turn taken below depth
  // One queue: nowhere to spread to.
  EXPECT_EQ(SpreadTarget(AtHome(1, 32, 64), &turn), kKeep);
}

TEST(SpreadPolicyTest, AtDepthEveryOtherReplyGoesToTheOtherQueuesInTurn) {
  uint32_t turn = 0;
  std::vector<uint32_t> targets;
  for (int i = 0; i < 8; ++i) {
    targets.push_back(SpreadTarget(AtHome(4, 2, kSpreadDepth), &turn));
  }
  // Holder 1 of 4: keeps one, hands one to 2, keeps, 3, keeps, 0, ...
  EXPECT_EQ(targets,
            (std::vector<uint32_t>{kKeep, 2, kKeep, 3, kKeep, 0, kKeep, 2}));
}

TEST(SpreadPolicyTest, ALoneRequestOnAnotherQueuesEntryGoesHome) {
  SpreadState state;
  state.queues = 2;
  state.holder = 0;
  state.owner = 1;
  state.with_handler = 1;
  state.held_units = 1;
  uint32_t turn = 0;
  EXPECT_EQ(SpreadTarget(state, &turn), 1u);
  // Among others it stays with the thread that holds it.
  state.with_handler = 2;
  EXPECT_EQ(SpreadTarget(state, &turn), kKeep);
}

}  // namespace
}  // namespace pvdisk::fuse::channel
