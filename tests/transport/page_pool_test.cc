// PagePool, the buddy allocator of a queue's data pages: runs are contiguous,
// power-of-two sized, never overlap, merge back with their buddies, and
// freed runs are reused first.
#include "transport/page_pool.h"

#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::transport {
namespace {

TEST(PagePoolTest, RunPagesRoundsUpToAPowerOfTwo) {
  EXPECT_EQ(PagePool::RunPages(1), 1u);
  EXPECT_EQ(PagePool::RunPages(2), 2u);
  EXPECT_EQ(PagePool::RunPages(3), 4u);
  EXPECT_EQ(PagePool::RunPages(4), 4u);
  EXPECT_EQ(PagePool::RunPages(5), 8u);
  EXPECT_EQ(PagePool::RunPages(11), 16u);
  EXPECT_EQ(PagePool::RunPages(32), 32u);
  EXPECT_EQ(PagePool::RunPages(33), 64u);
  EXPECT_EQ(PagePool::RunPages(256), 256u);
  EXPECT_EQ(PagePool::RunPages(257), 512u);
  EXPECT_EQ(PagePool::RunPages(4095), 4096u);
  EXPECT_EQ(PagePool::RunPages(4096), 4096u);
}

TEST(PagePoolTest, StartsWithEverythingFree) {
  PagePool pool(2048);
  EXPECT_EQ(pool.pages(), 2048u);
  EXPECT_EQ(pool.free_pages(), 2048u);
  EXPECT_EQ(pool.Allocate(2048), std::optional<uint32_t>(0));
  EXPECT_EQ(pool.free_pages(), 0u);
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
  pool.Free(0, 2048);
  EXPECT_EQ(pool.free_pages(), 2048u);
}

TEST(PagePoolTest, OnePagePool) {
  PagePool pool(1);
  EXPECT_EQ(pool.Allocate(2), std::nullopt);
  EXPECT_EQ(pool.Allocate(1), std::optional<uint32_t>(0));
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
  pool.Free(0, 1);
  EXPECT_EQ(pool.Allocate(1), std::optional<uint32_t>(0));
}

TEST(PagePoolTest, AllocationTakesTheRoundedRun) {
  PagePool pool(64);
  std::optional<uint32_t> three = pool.Allocate(3);
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(pool.free_pages(), 60u);
  std::optional<uint32_t> eleven = pool.Allocate(11);
  ASSERT_TRUE(eleven.has_value());
  EXPECT_EQ(pool.free_pages(), 44u);
  // Runs are aligned to their size (buddies) and do not overlap.
  EXPECT_EQ(*three % 4, 0u);
  EXPECT_EQ(*eleven % 16, 0u);
  EXPECT_TRUE(*three + 4 <= *eleven || *eleven + 16 <= *three);
  pool.Free(*three, 3);
  pool.Free(*eleven, 11);
  EXPECT_EQ(pool.free_pages(), 64u);
  EXPECT_EQ(pool.Allocate(64), std::optional<uint32_t>(0));
}

TEST(PagePoolTest, ExhaustionReturnsNullopt) {
  PagePool pool(16);
  EXPECT_EQ(pool.Allocate(17), std::nullopt);
  EXPECT_EQ(pool.Allocate(1000), std::nullopt);
  EXPECT_EQ(pool.free_pages(), 16u);
  std::vector<uint32_t> runs;
  for (int i = 0; i < 4; ++i) {
    std::optional<uint32_t> run = pool.Allocate(4);
    ASSERT_TRUE(run.has_value());
    runs.push_back(*run);
  }
  EXPECT_EQ(pool.free_pages(), 0u);
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
  EXPECT_EQ(pool.Allocate(4), std::nullopt);
  pool.Free(runs[2], 4);
  EXPECT_EQ(pool.Allocate(8), std::nullopt);  // only 4 free
  EXPECT_EQ(pool.Allocate(3), std::optional<uint32_t>(runs[2]));
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
}

TEST(PagePoolTest, FreePagesThatAreNotBuddiesDoNotMerge) {
  PagePool pool(8);
  for (uint32_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(pool.Allocate(1).has_value());
  }
  // Every other page: four free pages, but no two of them adjacent buddies.
  for (uint32_t page : {1u, 3u, 5u, 7u}) pool.Free(page, 1);
  EXPECT_EQ(pool.free_pages(), 4u);
  EXPECT_EQ(pool.Allocate(2), std::nullopt);
  // Pages 2 and 3 are buddies: freeing 2 makes the run 2..3, and with 0..1
  // freed, 0..3.
  pool.Free(2, 1);
  EXPECT_EQ(pool.Allocate(4), std::nullopt);  // page 0 still in use
  pool.Free(0, 1);
  EXPECT_EQ(pool.Allocate(4), std::optional<uint32_t>(0));
}

TEST(PagePoolTest, ReusesMostRecentlyFreedFirst) {
  PagePool pool(16);
  for (uint32_t expected = 0; expected < 16; ++expected) {
    ASSERT_EQ(pool.Allocate(1), std::optional<uint32_t>(expected));
  }
  // None of their buddies (4, 3, 6) is free, so they stay single pages.
  pool.Free(5, 1);
  pool.Free(2, 1);
  pool.Free(7, 1);
  EXPECT_EQ(pool.free_pages(), 3u);
  EXPECT_EQ(pool.Allocate(1), std::optional<uint32_t>(7));
  EXPECT_EQ(pool.Allocate(1), std::optional<uint32_t>(2));
  pool.Free(2, 1);
  EXPECT_EQ(pool.Allocate(1), std::optional<uint32_t>(2));
  EXPECT_EQ(pool.Allocate(1), std::optional<uint32_t>(5));
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
}

TEST(PagePoolTest, ReusesAFreedLargerRunFirst) {
  PagePool pool(256);
  std::vector<uint32_t> runs;
  for (int i = 0; i < 8; ++i) {
    std::optional<uint32_t> run = pool.Allocate(32);
    ASSERT_TRUE(run.has_value());
    runs.push_back(*run);
  }
  pool.Free(runs[1], 32);
  pool.Free(runs[6], 32);
  pool.Free(runs[3], 32);
  EXPECT_EQ(pool.Allocate(20), std::optional<uint32_t>(runs[3]));
  EXPECT_EQ(pool.Allocate(32), std::optional<uint32_t>(runs[6]));
}

TEST(PagePoolTest, HotRunStaysHot) {
  PagePool pool(1024);
  std::optional<uint32_t> first = pool.Allocate(8);
  ASSERT_TRUE(first.has_value());
  pool.Free(*first, 8);
  for (int i = 0; i < 100; ++i) {
    std::optional<uint32_t> run = pool.Allocate(8);
    ASSERT_EQ(run, first);
    pool.Free(*run, 8);
  }
  EXPECT_EQ(pool.free_pages(), 1024u);
}

TEST(PagePoolTest, EverySinglePageExactlyOnce) {
  PagePool pool(64);
  std::set<uint32_t> seen;
  while (std::optional<uint32_t> page = pool.Allocate(1)) {
    EXPECT_LT(*page, 64u);
    EXPECT_TRUE(seen.insert(*page).second) << *page;
  }
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_EQ(pool.free_pages(), 0u);
}

// Many rounds of random allocations and frees of mixed sizes, with the owner
// of every page tracked: a run is always inside the pool, aligned to its
// size, and never overlaps one in use; the free count always adds up; and
// once everything is freed again, the buddies have merged back into one run
// of the whole pool.
TEST(PagePoolTest, RandomMixedSizesNeverOverlapAndMergeBack) {
  constexpr uint32_t kPages = 2048;
  PagePool pool(kPages);
  std::mt19937 random(12345);
  struct Run {
    uint32_t first;
    uint32_t count;
  };
  std::vector<Run> live;
  std::vector<int> owner(kPages, -1);  // the id of the run, or -1
  int next_id = 0;
  uint64_t used = 0;
  const uint32_t kSizes[] = {1,  1,  2,  3,  4,   5,   8,  11,
                             16, 32, 33, 64, 100, 256, 257};
  int failures = 0;
  for (int round = 0; round < 20000; ++round) {
    const bool allocate = live.empty() || random() % 100 < 55;
    if (allocate) {
      const uint32_t count = kSizes[random() % std::size(kSizes)];
      const uint32_t run_pages = PagePool::RunPages(count);
      std::optional<uint32_t> first = pool.Allocate(count);
      if (!first) {
        ++failures;
        // Only possible if no aligned run of that size is entirely free.
        bool any_free = false;
        for (uint32_t start = 0; start < kPages && !any_free;
             start += run_pages) {
          bool all = true;
          for (uint32_t p = start; p < start + run_pages && all; ++p) {
            all = owner[p] < 0;
          }
          any_free = all;
        }
        ASSERT_FALSE(any_free) << "refused " << count << " pages in round "
                               << round << " though a run was free";
        continue;
      }
      ASSERT_LE(*first + run_pages, kPages);
      ASSERT_EQ(*first % run_pages, 0u) << "misaligned run";
      const int id = next_id++;
      for (uint32_t p = *first; p < *first + run_pages; ++p) {
        ASSERT_EQ(owner[p], -1)
            << "page " << p << " handed out twice (round " << round << ")";
        owner[p] = id;
      }
      live.push_back(Run{*first, count});
      used += run_pages;
    } else {
      const size_t index = random() % live.size();
      const Run run = live[index];
      live[index] = live.back();
      live.pop_back();
      const uint32_t run_pages = PagePool::RunPages(run.count);
      const int id = owner[run.first];
      ASSERT_GE(id, 0);
      for (uint32_t p = run.first; p < run.first + run_pages; ++p) {
        ASSERT_EQ(owner[p], id);
        owner[p] = -1;
      }
      pool.Free(run.first, run.count);
      used -= run_pages;
    }
    ASSERT_EQ(pool.free_pages(), kPages - used) << "round " << round;
  }
  EXPECT_GT(failures, 0) << "the pool never filled up; test too gentle";
  for (const Run& run : live) pool.Free(run.first, run.count);
  EXPECT_EQ(pool.free_pages(), kPages);
  EXPECT_EQ(pool.Allocate(kPages), std::optional<uint32_t>(0));
}

}  // namespace
}  // namespace pvdisk::transport
