// HugeBufferArena (io/huge_buffer_arena.h): blocks aligned to their size,
// never overlapping, reused before new pages are touched, buddies merged
// back into whole huge pages, nothing past the capacity, and the pages in
// transparent huge pages where the system allows it.
#include "io/huge_buffer_arena.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/smaps.h"
#include "gtest/gtest.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kPage = HugeBufferArena::kHugePage;

TEST(HugeBufferArenaTest, BlocksAreAlignedDisjointAndBounded) {
  HugeBufferArena arena(4 * kPage);
  ASSERT_EQ(arena.capacity(), 4 * kPage);
  std::mt19937 random(3);
  std::vector<std::pair<uint8_t*, uint64_t>> taken;
  uint64_t used = 0;
  for (int i = 0; i < 4000; ++i) {
    const uint64_t block = HugeBufferArena::kMinBlock << (random() % 10);
    uint8_t* at = arena.Take(block);
    if (at == nullptr) {
      // Full for this size: give back a random block and go on.
      ASSERT_FALSE(taken.empty());
      const size_t victim = random() % taken.size();
      arena.Give(taken[victim].first, taken[victim].second);
      used -= taken[victim].second;
      taken.erase(taken.begin() + static_cast<long>(victim));
      continue;
    }
    ASSERT_TRUE(arena.Owns(at));
    ASSERT_TRUE(arena.Owns(at + block - 1));
    ASSERT_EQ(reinterpret_cast<uintptr_t>(at) % block, 0u) << block;
    // Each block is marked over its whole length; the marks of every block
    // still taken must stay intact, so no two blocks overlap.
    std::memset(at, static_cast<int>(i & 0xff), block);
    taken.emplace_back(at, block);
    used += block;
    ASSERT_LE(used, arena.capacity());
    ASSERT_EQ(arena.used_bytes(), used);
  }
  std::sort(taken.begin(), taken.end());
  for (size_t i = 1; i < taken.size(); ++i) {
    ASSERT_LE(taken[i - 1].first + taken[i - 1].second, taken[i].first);
  }
  for (auto& [at, block] : taken) arena.Give(at, block);
  EXPECT_EQ(arena.used_bytes(), 0u);
  // Everything merged back: four whole huge pages again.
  for (int i = 0; i < 4; ++i) EXPECT_NE(arena.Take(kPage), nullptr) << i;
  EXPECT_EQ(arena.Take(HugeBufferArena::kMinBlock), nullptr);
}

TEST(HugeBufferArenaTest, FreedBlocksAreReusedBeforeNewPagesAreTouched) {
  HugeBufferArena arena(8 * kPage);
  std::vector<uint8_t*> small;
  for (int i = 0; i < 512; ++i) {
    small.push_back(arena.Take(HugeBufferArena::kMinBlock));
    ASSERT_NE(small.back(), nullptr);
  }
  EXPECT_EQ(arena.touched_bytes(), kPage);  // 512 x 4 KiB: one page
  for (uint8_t* at : small) arena.Give(at, HugeBufferArena::kMinBlock);
  // The page merged whole: a 2 MiB block comes from it, not a new page.
  uint8_t* whole = arena.Take(kPage);
  EXPECT_EQ(whole, small.front());
  EXPECT_EQ(arena.touched_bytes(), kPage);
  arena.Give(whole, kPage);
  // Same for 1 MiB blocks taken and given back in turn.
  for (int i = 0; i < 100; ++i) {
    uint8_t* a = arena.Take(1 << 20);
    uint8_t* b = arena.Take(1 << 20);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    arena.Give(a, 1 << 20);
    arena.Give(b, 1 << 20);
  }
  EXPECT_EQ(arena.touched_bytes(), kPage);
}

TEST(HugeBufferArenaTest, RefusesSizesItDoesNotServe) {
  HugeBufferArena arena(kPage);
  EXPECT_EQ(arena.Take(2 * kPage), nullptr);
  EXPECT_EQ(arena.Take(3 * 4096), nullptr);
  EXPECT_EQ(arena.Take(512), nullptr);
  EXPECT_EQ(HugeBufferArena::BlockFor(1), 4096u);
  EXPECT_EQ(HugeBufferArena::BlockFor(4097), 8192u);
  EXPECT_EQ(HugeBufferArena::BlockFor(1 << 20), uint64_t{1} << 20);
}

TEST(HugeBufferArenaTest, TouchedPagesAreHuge) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes((std::istreambuf_iterator<char>(thp)),
                    std::istreambuf_iterator<char>());
  if (modes.find("[never]") != std::string::npos || modes.empty()) {
    GTEST_SKIP() << "transparent huge pages are off here";
  }
  HugeBufferArena arena(4 * kPage);
  EXPECT_TRUE(arena.advised_huge());
  uint8_t* at = arena.Take(1 << 20);
  ASSERT_NE(at, nullptr);
  std::memset(at, 1, 1 << 20);  // the first touch faults the page in
  // The kernel gives a huge page at the fault when one is free; the
  // machine's memory is far from exhausted in the suite.
  EXPECT_GE(pvdisk::testing::SmapsField(at, "AnonHugePages"), 2048) << "KiB";
  arena.Give(at, 1 << 20);
}

}  // namespace
}  // namespace pvdisk::io
