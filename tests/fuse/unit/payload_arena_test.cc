// The FUSE payload arena: where each entry's payload lies, and which
// entries the kernel may back with transparent huge pages (the top
// `huge_entries` of each queue; payload_arena.h says why). What the kernel
// made of the advice is read back from /proc/self/smaps.
#include "fuse/channel/payload_arena.h"

#include <cstring>
#include <string>

#include "common/smaps.h"
#include "common/thp_mode.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse::channel {
namespace {

constexpr uint32_t kMiB = 1 << 20;

TEST(PayloadArenaTest, EntriesLieOneAfterAnotherFromAnAlignedBase) {
  auto arena = PayloadArena::Create(2, 8, kMiB);
  ASSERT_TRUE(arena.ok()) << arena.status();
  PayloadArena& a = **arena;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.QueueBase(0)) % (2 * kMiB), 0u);
  EXPECT_EQ(a.QueueBase(1), a.QueueBase(0) + 8 * size_t{kMiB});
  EXPECT_EQ(a.lent().bytes, 16 * size_t{kMiB});
  EXPECT_EQ(a.huge_entries(), 0u);
  // Every byte of it is usable memory.
  std::memset(a.QueueBase(0), 0x5a, a.lent().bytes);
  EXPECT_EQ(a.QueueBase(1)[8 * kMiB - 1], 0x5a);
}

TEST(PayloadArenaTest, RefusesMoreHugeEntriesThanTheDepth) {
  EXPECT_FALSE(PayloadArena::Create(2, 8, kMiB, 9).ok());
  EXPECT_FALSE(PayloadArena::Create(2, 8, 1000, 0).ok());
}

TEST(PayloadArenaTest, TheTopEntriesOfEachQueueAreAdvisedIntoHugePages) {
  const std::string mode = testing::ThpMode();
  auto arena = PayloadArena::Create(2, 8, kMiB, 4);
  ASSERT_TRUE(arena.ok()) << arena.status();
  PayloadArena& a = **arena;
  if (mode != "always" && mode != "madvise") {
    EXPECT_EQ(a.huge_entries(), 0u);
    EXPECT_NE(a.huge_note(), "");
    GTEST_SKIP() << "transparent huge pages are " << mode << " here";
  }
  EXPECT_EQ(a.huge_entries(), 4u);
  EXPECT_EQ(a.huge_note(), "");
  for (uint32_t q = 0; q < 2; ++q) {
    SCOPED_TRACE(q);
    const uint8_t* top = a.QueueBase(q) + 7 * size_t{kMiB};
    const uint8_t* first_huge = a.QueueBase(q) + 4 * size_t{kMiB};
    const uint8_t* bottom = a.QueueBase(q);
    EXPECT_EQ(testing::SmapsField(top, "THPeligible"), 1);
    EXPECT_EQ(testing::SmapsField(first_huge, "THPeligible"), 1);
    // Under "madvise" only the advised range may be huge.
    EXPECT_EQ(testing::SmapsField(bottom, "THPeligible"),
              mode == "always" ? 1 : 0);
  }
  // Touching a huge entry faults in a whole huge page (on a machine whose
  // memory is too fragmented for one this would be 0; not seen here).
  std::memset(a.QueueBase(0) + 6 * size_t{kMiB}, 1, 2 * kMiB);
  EXPECT_GE(
      testing::SmapsField(a.QueueBase(0) + 7 * size_t{kMiB}, "AnonHugePages"),
      2048);
}

TEST(PayloadArenaTest, NoHugeEntriesLeavesTheArenaToTheSystemDefault) {
  const std::string mode = testing::ThpMode();
  if (mode != "madvise") GTEST_SKIP() << "needs THP madvise, have " << mode;
  auto arena = PayloadArena::Create(2, 8, kMiB, 0);
  ASSERT_TRUE(arena.ok()) << arena.status();
  std::memset((*arena)->QueueBase(0), 1, 16 * size_t{kMiB});
  EXPECT_EQ(testing::SmapsField((*arena)->QueueBase(1), "THPeligible"), 0);
  EXPECT_EQ(testing::SmapsField((*arena)->QueueBase(1), "AnonHugePages"), 0);
}

}  // namespace
}  // namespace pvdisk::fuse::channel
