#include "transport/ring_index.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace pvdisk::transport {
namespace {

constexpr RingIdx kOld = 0xFFFFFFF0u;
constexpr RingIdx kNew = 0x10u;

TEST(NeedsNotifyTest, SimpleWindow) {
  EXPECT_TRUE(NeedsNotify(0, 1, 1));  // SHARED_RING_INIT sets event 1
  EXPECT_FALSE(NeedsNotify(1, 2, 1));
  EXPECT_TRUE(NeedsNotify(1, 5, 3));
  EXPECT_TRUE(NeedsNotify(1, 5, 5));
  EXPECT_FALSE(NeedsNotify(1, 5, 6));
  EXPECT_FALSE(NeedsNotify(1, 5, 1));
}

TEST(NeedsNotifyTest, AcrossTheWrap) {
  EXPECT_TRUE(NeedsNotify(kOld, kNew, kOld + 1));  // first new index
  EXPECT_TRUE(NeedsNotify(kOld, kNew, 0xFFFFFFFFu));
  EXPECT_TRUE(NeedsNotify(kOld, kNew, 0));
  EXPECT_TRUE(NeedsNotify(kOld, kNew, 0x5));
  EXPECT_TRUE(NeedsNotify(kOld, kNew, kNew));   // event == new: notified
  EXPECT_FALSE(NeedsNotify(kOld, kNew, kOld));  // event == old: already seen
  EXPECT_FALSE(NeedsNotify(kOld, kNew, kNew + 1));
  EXPECT_FALSE(NeedsNotify(kOld, kNew, kOld - 1));
  EXPECT_FALSE(NeedsNotify(kOld, kNew, 0x80000000u));
}

TEST(NeedsNotifyTest, EmptyWindowNeverNotifies) {
  for (RingIdx prod : {0u, 1u, 0x7FFFFFFFu, 0xFFFFFFFFu}) {
    for (RingIdx event : {prod - 1, prod, prod + 1, 0u, 0xFFFFFFFFu}) {
      EXPECT_FALSE(NeedsNotify(prod, prod, event))
          << "prod=" << prod << " event=" << event;
    }
  }
}

TEST(NeedsNotifyTest, MatchesIntervalDefinitionNearWrap) {
  // event = old + j is in (old, old + k] iff 1 <= j <= k.
  for (RingIdx old : {0u, 5u, 0xFFFFFFE0u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
    for (uint32_t k = 0; k <= 40; ++k) {
      for (int j = -5; j <= 50; ++j) {
        RingIdx event = old + static_cast<RingIdx>(j);
        bool expected = j >= 1 && static_cast<uint32_t>(j) <= k;
        ASSERT_EQ(NeedsNotify(old, old + k, event), expected)
            << "old=" << old << " k=" << k << " j=" << j;
      }
    }
  }
}

TEST(UnconsumedRequestsTest, PublishedAndNotConsumed) {
  EXPECT_EQ(UnconsumedRequests(0, 0, 0, 32), 0u);
  EXPECT_EQ(UnconsumedRequests(5, 2, 2, 32), 3u);
  EXPECT_EQ(UnconsumedRequests(32, 0, 0, 32), 32u);
}

TEST(UnconsumedRequestsTest, AcrossTheWrap) {
  EXPECT_EQ(UnconsumedRequests(3, 0xFFFFFFFEu, 0xFFFFFFFEu, 32), 5u);
  EXPECT_EQ(UnconsumedRequests(0x10, 0xFFFFFFF0u, 0xFFFFFFF0u, 32), 32u);
  EXPECT_EQ(UnconsumedRequests(0, 0, 0xFFFFFFFFu, 32), 0u);
}

TEST(UnconsumedRequestsTest, BoundedByFreeResponseSlots) {
  // 30 taken and not yet answered leave room for 2 more.
  EXPECT_EQ(UnconsumedRequests(40, 30, 0, 32), 2u);
  EXPECT_EQ(UnconsumedRequests(31, 30, 0, 32), 1u);
  EXPECT_EQ(UnconsumedRequests(40, 32, 0, 32), 0u);
  // The same across the wrap.
  EXPECT_EQ(UnconsumedRequests(0x20, 0x0E, 0xFFFFFFF0u, 32), 2u);
  EXPECT_EQ(UnconsumedRequests(0x20, 0x10, 0xFFFFFFF0u, 32), 0u);
}

TEST(RequestProducerOverflowTest, ClaimsAtMostRingSize) {
  EXPECT_FALSE(RequestProducerOverflow(0, 0, 32));
  EXPECT_FALSE(RequestProducerOverflow(32, 0, 32));
  EXPECT_TRUE(RequestProducerOverflow(33, 0, 32));
  EXPECT_FALSE(RequestProducerOverflow(0x10, 0xFFFFFFF0u, 32));
  EXPECT_TRUE(RequestProducerOverflow(0x11, 0xFFFFFFF0u, 32));
  // A producer index that moved backwards is as impossible.
  EXPECT_TRUE(RequestProducerOverflow(4, 5, 32));
  EXPECT_TRUE(RequestProducerOverflow(0xFFFFFFFFu, 0, 32));
}

TEST(ResponseProducerOverflowTest, ClaimsAtMostRingSize) {
  EXPECT_FALSE(ResponseProducerOverflow(0, 0, 32));
  EXPECT_FALSE(ResponseProducerOverflow(32, 0, 32));
  EXPECT_TRUE(ResponseProducerOverflow(33, 0, 32));
  EXPECT_FALSE(ResponseProducerOverflow(0x10, 0xFFFFFFF0u, 32));
  EXPECT_TRUE(ResponseProducerOverflow(0x11, 0xFFFFFFF0u, 32));
  EXPECT_TRUE(ResponseProducerOverflow(4, 5, 32));
}

TEST(RingIndexTest, UsableInConstantExpressions) {
  static_assert(NeedsNotify(0xFFFFFFFFu, 1, 0));
  static_assert(UnconsumedRequests(3, 0xFFFFFFFEu, 0xFFFFFFFEu, 32) == 5);
  static_assert(RequestProducerOverflow(33, 0, 32));
  static_assert(!ResponseProducerOverflow(32, 0, 32));
  SUCCEED();
}

}  // namespace
}  // namespace pvdisk::transport
