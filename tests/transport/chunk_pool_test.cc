#include "transport/chunk_pool.h"

#include <optional>
#include <set>

#include "gtest/gtest.h"

namespace pvdisk::transport {
namespace {

TEST(ChunkPoolTest, HandsOutChunkZeroFirstAndInOrder) {
  ChunkPool pool(4, 11);
  EXPECT_EQ(pool.chunk_count(), 4u);
  EXPECT_EQ(pool.pages_per_chunk(), 11u);
  EXPECT_EQ(pool.free_count(), 4u);
  for (uint32_t expected = 0; expected < 4; ++expected) {
    EXPECT_EQ(pool.Allocate(), std::optional<uint32_t>(expected));
  }
  EXPECT_EQ(pool.free_count(), 0u);
}

TEST(ChunkPoolTest, ExhaustionReturnsNulloptUntilFreed) {
  ChunkPool pool(2, 1);
  ASSERT_TRUE(pool.Allocate().has_value());
  ASSERT_TRUE(pool.Allocate().has_value());
  EXPECT_EQ(pool.Allocate(), std::nullopt);
  EXPECT_EQ(pool.Allocate(), std::nullopt);
  pool.Free(1);
  EXPECT_EQ(pool.Allocate(), std::optional<uint32_t>(1));
  EXPECT_EQ(pool.Allocate(), std::nullopt);
}

TEST(ChunkPoolTest, ReusesMostRecentlyFreedFirst) {
  ChunkPool pool(8, 2);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(pool.Allocate().has_value());
  pool.Free(5);
  pool.Free(2);
  pool.Free(7);
  EXPECT_EQ(pool.free_count(), 3u);
  EXPECT_EQ(pool.Allocate(), std::optional<uint32_t>(7));
  EXPECT_EQ(pool.Allocate(), std::optional<uint32_t>(2));
  pool.Free(2);
  EXPECT_EQ(pool.Allocate(), std::optional<uint32_t>(2));
  EXPECT_EQ(pool.Allocate(), std::optional<uint32_t>(5));
  EXPECT_EQ(pool.Allocate(), std::nullopt);
}

TEST(ChunkPoolTest, HotChunkStaysHot) {
  ChunkPool pool(16, 1);
  // Allocate/free one at a time: always the same chunk.
  for (int i = 0; i < 100; ++i) {
    std::optional<uint32_t> chunk = pool.Allocate();
    ASSERT_EQ(chunk, std::optional<uint32_t>(0));
    pool.Free(*chunk);
  }
  EXPECT_EQ(pool.free_count(), 16u);
}

TEST(ChunkPoolTest, FirstPage) {
  ChunkPool pool(32, 11);
  EXPECT_EQ(pool.FirstPage(0), 0u);
  EXPECT_EQ(pool.FirstPage(1), 11u);
  EXPECT_EQ(pool.FirstPage(31), 341u);
  ChunkPool single(4, 1);
  EXPECT_EQ(single.FirstPage(3), 3u);
}

TEST(ChunkPoolTest, EveryChunkExactlyOnce) {
  ChunkPool pool(64, 3);
  std::set<uint32_t> seen;
  while (std::optional<uint32_t> chunk = pool.Allocate()) {
    EXPECT_LT(*chunk, 64u);
    EXPECT_TRUE(seen.insert(*chunk).second) << *chunk;
  }
  EXPECT_EQ(seen.size(), 64u);
}

}  // namespace
}  // namespace pvdisk::transport
