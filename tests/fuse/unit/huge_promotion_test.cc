// Entries made huge on use (fuse/channel/huge_promotion.h): which pages a
// large request asks for, the per-queue bound, that a wanted entry is not
// pinnable until settled, and that HugeCollapser::Collapse makes a touched
// page huge (read back from /proc/self/smaps).
#include "fuse/channel/huge_promotion.h"

#include <cstring>
#include <string>

#include "common/smaps.h"
#include "common/thp_mode.h"
#include "fuse/channel/huge_collapser.h"
#include "fuse/channel/payload_arena.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse::channel {
namespace {

constexpr uint32_t kMiB = 1 << 20;

// Two queues of 8 entries of 1 MiB, the top 2 of each huge: each queue may
// have 2 MiB (one huge page) more made huge.
std::unique_ptr<PayloadArena> SmallArena() {
  auto arena = PayloadArena::Create(2, 8, kMiB, 2);
  return arena.ok() ? std::move(*arena) : nullptr;
}

TEST(HugePromotionTest, ALargeRequestAsksForItsPageWithinTheQueuesBound) {
  if (testing::ThpMode() == "never") GTEST_SKIP() << "no huge pages here";
  std::unique_ptr<PayloadArena> arena = SmallArena();
  ASSERT_NE(arena, nullptr);
  HugePromotion* promotion = arena->promotion();
  ASSERT_NE(promotion, nullptr);
  EXPECT_EQ(promotion->limit_bytes(), 2 * size_t{kMiB});
  const uint64_t generation = promotion->generation();
  // The huge entries (6 and 7) are huge already: nothing to ask.
  EXPECT_FALSE(promotion->Want(0, 7));
  EXPECT_EQ(promotion->generation(), generation);
  // Entry 0 asks for the page of entries 0 and 1; both are then not to be
  // pinned, entry 2 still may be.
  EXPECT_TRUE(promotion->Want(0, 0));
  EXPECT_NE(promotion->generation(), generation);
  EXPECT_FALSE(promotion->Pinnable(0));
  EXPECT_FALSE(promotion->Pinnable(1));
  EXPECT_TRUE(promotion->Pinnable(2));
  // Asked once only; and queue 0's bound (one page) is reached.
  EXPECT_FALSE(promotion->Want(0, 1));
  EXPECT_FALSE(promotion->Want(0, 2));
  EXPECT_TRUE(promotion->Pinnable(2));
  // Queue 1 has a bound of its own (its entry 0 is arena entry 8).
  EXPECT_TRUE(promotion->Want(1, 0));
  EXPECT_FALSE(promotion->Pinnable(8));
  // The collapser sees both pages; settled, they may be pinned again.
  std::vector<uint8_t*> pending =
      promotion->Pending(std::chrono::milliseconds(0));
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0], arena->QueueBase(0));
  EXPECT_EQ(pending[1], arena->QueueBase(1));
  promotion->Settle(pending[0], HugePromotion::State::kHuge);
  promotion->Settle(pending[1], HugePromotion::State::kGaveUp);
  EXPECT_TRUE(promotion->Pinnable(0));
  EXPECT_TRUE(promotion->Pinnable(8));
  EXPECT_EQ(promotion->promoted(), 1u);
  EXPECT_EQ(promotion->gave_up(), 1u);
  EXPECT_TRUE(promotion->Pending(std::chrono::milliseconds(0)).empty());
  // Settled pages are not asked for again.
  EXPECT_FALSE(promotion->Want(1, 1));
}

// One huge entry of 1 MiB is less than a huge page: the bound is one huge
// page all the same, so a large request may still ask for its page.
TEST(HugePromotionTest, OneHugeEntryStillAllowsOnePage) {
  if (testing::ThpMode() == "never") GTEST_SKIP() << "no huge pages here";
  auto arena = PayloadArena::Create(2, 8, kMiB, 1);
  ASSERT_TRUE(arena.ok()) << arena.status();
  HugePromotion* promotion = (*arena)->promotion();
  ASSERT_NE(promotion, nullptr);
  EXPECT_EQ(promotion->limit_bytes(), kHugePageBytes);
  EXPECT_TRUE(promotion->Want(0, 0));
  EXPECT_FALSE(promotion->Want(0, 2));  // the bound: one page
}

TEST(HugePromotionTest, NoHugeEntriesNoPromotion) {
  auto arena = PayloadArena::Create(2, 8, kMiB, 0);
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ((*arena)->promotion(), nullptr);
}

TEST(HugeCollapserTest, CollapseMakesATouchedPageHuge) {
  if (testing::ThpMode() == "never") GTEST_SKIP() << "no huge pages here";
  std::unique_ptr<PayloadArena> arena = SmallArena();
  ASSERT_NE(arena, nullptr);
  uint8_t* page = arena->QueueBase(0);  // entries 0 and 1, not advised
  std::memset(page, 0x5a, 128 << 10);   // in 4 KiB pages
  if (testing::ThpMode() == "madvise") {
    EXPECT_EQ(testing::SmapsField(page, "AnonHugePages"), 0);
  }
  const int error = HugeCollapser::Collapse(page);
  if (error == EINVAL) GTEST_SKIP() << "no MADV_COLLAPSE (Linux 6.1)";
  ASSERT_EQ(error, 0) << strerror(error);
  EXPECT_EQ(testing::SmapsField(page, "AnonHugePages"), 2048);
  // In place: the data is where it was, the rest zero.
  EXPECT_EQ(page[0], 0x5a);
  EXPECT_EQ(page[(128 << 10) - 1], 0x5a);
  EXPECT_EQ(page[128 << 10], 0);
}

}  // namespace
}  // namespace pvdisk::fuse::channel
