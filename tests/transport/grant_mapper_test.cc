// GrantMapper: persistent grants hand out addresses in the backend's mapping
// of the data area; per-request grants map the pages on demand (their own
// mmap of the shared region), alias the same memory, and count pages.
#include "transport/grant_mapper.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "stats/queue_stats.h"
#include "transport/shared_region.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;

constexpr size_t kPage = 4096;
constexpr size_t kDataOffset = 2 * kPage;  // e.g. two ring pages first
constexpr uint32_t kDataPages = 16;

class GrantMapperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto region = SharedRegion::Create("pvdisk-grant-test",
                                       kDataOffset + kDataPages * kPage);
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = std::move(*region);
    auto mapping = region_->Map();
    ASSERT_TRUE(mapping.ok()) << mapping.status();
    mapping_ = std::move(*mapping);
    data_ = mapping_->base() + kDataOffset;
  }

  uint64_t Get(Counter c) { return stats_.Snapshot().Get(c); }

  std::unique_ptr<SharedRegion> region_;
  std::unique_ptr<RegionMapping> mapping_;
  uint8_t* data_ = nullptr;
  stats::QueueStats stats_;
};

TEST_F(GrantMapperTest, PersistentGrantsAreAddressesInTheMapping) {
  std::unique_ptr<GrantMapper> grants = NewPersistentGrants(data_);
  EXPECT_TRUE(grants->persistent());
  PageMapping mapping;
  ASSERT_TRUE(grants->MapPages(5, 3, &mapping));
  EXPECT_EQ(mapping.address, data_ + 5 * kPage);
  EXPECT_EQ(mapping.pages, 3u);
  EXPECT_FALSE(mapping.owned);
  grants->UnmapPages(mapping);  // nothing to do
  ASSERT_TRUE(grants->MapPages(0, 1, &mapping));
  EXPECT_EQ(mapping.address, data_);
  // Still usable after "unmapping": the mapping is the persistent one.
  mapping.address[0] = 0x5A;
  EXPECT_EQ(data_[0], 0x5A);
}

// Lent memory follows the data area after a one-page gap: its pages map to
// the lent addresses; the gap, a run across it and a run past the end are
// refused.
TEST_F(GrantMapperTest, PersistentGrantsReachLentMemoryAfterTheGap) {
  alignas(4096) static uint8_t lent[4 * kPage];
  std::unique_ptr<GrantMapper> grants =
      NewPersistentGrants(data_, kDataPages, LentMemory{lent, sizeof(lent)});
  const uint32_t first_lent = LentFirstPage(kDataPages);
  EXPECT_EQ(first_lent, kDataPages + 1);
  PageMapping mapping;
  ASSERT_TRUE(grants->MapPages(kDataPages - 2, 2, &mapping));
  EXPECT_EQ(mapping.address, data_ + (kDataPages - 2) * kPage);
  ASSERT_TRUE(grants->MapPages(first_lent + 1, 3, &mapping));
  EXPECT_EQ(mapping.address, lent + kPage);
  EXPECT_EQ(mapping.pages, 3u);
  EXPECT_FALSE(grants->MapPages(kDataPages, 1, &mapping));      // the gap
  EXPECT_FALSE(grants->MapPages(kDataPages - 1, 3, &mapping));  // across
  EXPECT_FALSE(grants->MapPages(first_lent + 3, 2, &mapping));  // past it
  EXPECT_FALSE(grants->MapPages(UINT32_MAX, 2, &mapping));      // wraps
}

TEST_F(GrantMapperTest, PerRequestGrantsAliasThePersistentMapping) {
  std::unique_ptr<GrantMapper> grants =
      NewPerRequestGrants(region_.get(), kDataOffset, &stats_);
  EXPECT_FALSE(grants->persistent());

  PageMapping mapping;
  ASSERT_TRUE(grants->MapPages(3, 2, &mapping));
  EXPECT_TRUE(mapping.owned);
  EXPECT_EQ(mapping.pages, 2u);
  ASSERT_NE(mapping.address, nullptr);
  EXPECT_NE(mapping.address, data_ + 3 * kPage);  // a mapping of its own
  EXPECT_EQ(Get(Counter::grant_maps), 2u);
  EXPECT_EQ(Get(Counter::grant_unmaps), 0u);

  // Written through the per-request mapping, read through the persistent
  // one: the same bytes, at data_offset + page * 4096.
  for (size_t i = 0; i < 2 * kPage; ++i) {
    mapping.address[i] = static_cast<uint8_t>(i * 13 + 1);
  }
  for (size_t i = 0; i < 2 * kPage; ++i) {
    ASSERT_EQ(data_[3 * kPage + i], static_cast<uint8_t>(i * 13 + 1)) << i;
  }
  // And the other way round.
  std::memset(data_ + 4 * kPage + 100, 0xC3, 50);
  EXPECT_EQ(mapping.address[kPage + 99],
            static_cast<uint8_t>((kPage + 99) * 13 + 1));
  EXPECT_EQ(mapping.address[kPage + 100], 0xC3);
  EXPECT_EQ(mapping.address[kPage + 149], 0xC3);
  // Neighbouring pages are untouched.
  EXPECT_EQ(data_[3 * kPage - 1], 0);
  EXPECT_EQ(data_[5 * kPage], 0);

  grants->UnmapPages(mapping);
  EXPECT_EQ(Get(Counter::grant_maps), 2u);
  EXPECT_EQ(Get(Counter::grant_unmaps), 2u);
}

TEST_F(GrantMapperTest, PerRequestGrantsStartAtTheDataOffset) {
  std::unique_ptr<GrantMapper> grants =
      NewPerRequestGrants(region_.get(), kDataOffset, &stats_);
  data_[0] = 0x11;                         // data page 0
  data_[(kDataPages - 1) * kPage] = 0x22;  // the last data page
  mapping_->base()[0] = 0x99;              // the ring, before the data
  PageMapping first;
  ASSERT_TRUE(grants->MapPages(0, 1, &first));
  EXPECT_EQ(first.address[0], 0x11);
  PageMapping last;
  ASSERT_TRUE(grants->MapPages(kDataPages - 1, 1, &last));
  EXPECT_EQ(last.address[0], 0x22);
  PageMapping all;
  ASSERT_TRUE(grants->MapPages(0, kDataPages, &all));
  EXPECT_EQ(all.address[0], 0x11);
  EXPECT_EQ(all.address[(kDataPages - 1) * kPage], 0x22);
  EXPECT_EQ(Get(Counter::grant_maps), 2u + kDataPages);
  grants->UnmapPages(first);
  grants->UnmapPages(last);
  grants->UnmapPages(all);
  EXPECT_EQ(Get(Counter::grant_unmaps), 2u + kDataPages);
}

TEST_F(GrantMapperTest, PerRequestGrantsCountEveryMapAndUnmap) {
  std::unique_ptr<GrantMapper> grants =
      NewPerRequestGrants(region_.get(), kDataOffset, &stats_);
  uint64_t pages = 0;
  for (uint32_t round = 0; round < 100; ++round) {
    const uint32_t first = round % kDataPages;
    const uint32_t count = 1 + round % (kDataPages - first);
    PageMapping mapping;
    ASSERT_TRUE(grants->MapPages(first, count, &mapping));
    mapping.address[0] = static_cast<uint8_t>(round);
    ASSERT_EQ(data_[first * kPage], static_cast<uint8_t>(round));
    grants->UnmapPages(mapping);
    pages += count;
  }
  EXPECT_EQ(Get(Counter::grant_maps), pages);
  EXPECT_EQ(Get(Counter::grant_unmaps), pages);
  // A mapping the mapper did not make (owned == false) is not unmapped.
  grants->UnmapPages(PageMapping{data_, 4, false});
  EXPECT_EQ(Get(Counter::grant_unmaps), pages);
  data_[0] = 1;  // still mapped
}

}  // namespace
}  // namespace pvdisk::transport
