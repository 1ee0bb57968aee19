// The qcow2 core without files: header parsing and its refusals, refcount
// packing at every width, the table cache, the layout checks, and the
// mapping state machine fed by hand (NeedTable, then the table).
#include <cstring>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "image/qcow2/allocator.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/features.h"
#include "image/qcow2/header.h"
#include "image/qcow2/layout.h"
#include "image/qcow2/mapping.h"
#include "image/qcow2/metadata.h"
#include "image/qcow2/metadata_journal.h"
#include "image/qcow2/published_map.h"
#include "image/qcow2/table_cache.h"
#include "image/qcow2/update.h"

namespace pvdisk::image::qcow2 {
namespace {

// A valid v3 header of a 1 MiB image with 4 KiB clusters: refcount table
// at 4K, L1 at 8K.
Qcow2Header SmallHeader() {
  Qcow2Header h;
  h.cluster_bits = 12;
  h.size = 1 << 20;
  h.l1_size = 1;
  h.l1_table_offset = 8192;
  h.refcount_table_offset = 4096;
  h.refcount_table_clusters = 1;
  return h;
}

std::vector<uint8_t> Encoded(const Qcow2Header& h) {
  absl::StatusOr<std::vector<uint8_t>> bytes = EncodeQcow2Header(h);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return *bytes;
}

std::string Refusal(const std::vector<uint8_t>& bytes) {
  absl::StatusOr<Qcow2Header> h = ParseQcow2Header(bytes, "img");
  EXPECT_FALSE(h.ok());
  return h.ok() ? "" : std::string(h.status().message());
}

TEST(Qcow2HeaderTest, RoundTripsV3WithBackingAndFormat) {
  Qcow2Header h = SmallHeader();
  h.backing_file = "base.raw";
  h.backing_format = "raw";
  absl::StatusOr<Qcow2Header> got = ParseQcow2Header(Encoded(h), "img");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->version, 3u);
  EXPECT_EQ(got->cluster_size(), 4096u);
  EXPECT_EQ(got->size, 1u << 20);
  EXPECT_EQ(got->backing_file, "base.raw");
  EXPECT_EQ(got->backing_format, "raw");
  EXPECT_EQ(got->refcount_bits(), 16u);
}

TEST(Qcow2HeaderTest, RoundTripsV2) {
  Qcow2Header h = SmallHeader();
  h.version = 2;
  absl::StatusOr<Qcow2Header> got = ParseQcow2Header(Encoded(h), "img");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->version, 2u);
  EXPECT_EQ(got->refcount_order, 4u);
  EXPECT_EQ(got->header_length, kV2HeaderBytes);
}

TEST(Qcow2HeaderTest, RefusesEachBadFieldNamingIt) {
  std::vector<uint8_t> b = Encoded(SmallHeader());
  auto with = [&](size_t at, int width, uint64_t value) {
    std::vector<uint8_t> copy = b;
    if (width == 4) StoreBe32(copy.data() + at, static_cast<uint32_t>(value));
    if (width == 8) StoreBe64(copy.data() + at, value);
    return Refusal(copy);
  };
  EXPECT_NE(with(0, 4, 0x12345678).find("not a qcow2 image"),
            std::string::npos);
  EXPECT_NE(with(4, 4, 4).find("version 4"), std::string::npos);
  EXPECT_NE(
      with(20, 4, 8).find("cluster_bits 8 is out of range; allowed 9..21"),
      std::string::npos);
  EXPECT_NE(
      with(20, 4, 31).find("cluster_bits 31 is out of range; allowed 9..21"),
      std::string::npos);
  EXPECT_NE(with(36, 4, 1u << 31).find("l1_size 2147483648 is too large"),
            std::string::npos);
  EXPECT_NE(
      with(96, 4, 7).find("refcount_order 7 is not supported; allowed 0..6"),
      std::string::npos);
  EXPECT_NE(with(32, 4, 1).find("crypt_method 1"), std::string::npos);
  EXPECT_NE(with(40, 8, 8192 + 512).find("l1_table_offset"), std::string::npos);
  EXPECT_NE(with(48, 8, 0).find("refcount_table_offset 0"), std::string::npos);
  EXPECT_NE(with(24, 8, 1000).find("virtual size 1000"), std::string::npos);
  // 1 GiB needs 512 L1 entries with 4 KiB clusters; the header has 1.
  EXPECT_NE(with(24, 8, 1ull << 30).find("l1_size 1 maps less"),
            std::string::npos);
  EXPECT_NE(with(72, 8, kIncompatCorrupt).find("bit 1 (corrupt)"),
            std::string::npos);
  EXPECT_NE(
      with(72, 8, kIncompatExternalData).find("bit 2 (external data file)"),
      std::string::npos);
  // Extended L2 entries are read, but need clusters of 16 KiB at least.
  EXPECT_NE(
      with(72, 8, kIncompatExtendedL2)
          .find("cluster_bits 12 with extended L2 entries; allowed 14..21"),
      std::string::npos);
  EXPECT_NE(with(72, 8, 1ull << 9).find("bit 9 (unknown)"), std::string::npos);
  EXPECT_NE(with(8, 8, 4000).find("backing_file_size 0"), std::string::npos);
  EXPECT_NE(with(100, 4, 100).find("header_length 100"), std::string::npos);
  EXPECT_NE(Refusal(std::vector<uint8_t>(b.begin(), b.begin() + 40))
                .find("needs 72 bytes"),
            std::string::npos);
}

TEST(Qcow2HeaderTest, ClusterBitsBoundaries) {
  for (uint32_t bits : {9u, 21u}) {
    Qcow2Header h = SmallHeader();
    h.cluster_bits = bits;
    h.l1_table_offset = h.refcount_table_offset = 0;
    h.l1_table_offset = 2ull << bits;
    h.refcount_table_offset = 1ull << bits;
    h.l1_size = static_cast<uint32_t>(L1EntriesFor(h.size, bits));
    EXPECT_TRUE(ParseQcow2Header(Encoded(h), "img").ok()) << bits;
  }
  std::vector<uint8_t> b = Encoded(SmallHeader());
  StoreBe32(b.data() + 20, 22);
  EXPECT_NE(Refusal(b).find("cluster_bits 22"), std::string::npos);
  StoreBe64(b.data() + 72, 0);
  StoreBe32(b.data() + 20, 12);
  StoreBe32(b.data() + 96, 6);  // 64-bit refcounts: accepted
  EXPECT_TRUE(ParseQcow2Header(b, "img").ok());
}

TEST(Qcow2HeaderTest, AcceptsDirtyAndLazyRefcountsAndSkipsUnknownExtensions) {
  std::vector<uint8_t> b = Encoded(SmallHeader());
  StoreBe64(b.data() + 72, kIncompatDirty);
  StoreBe64(b.data() + 80, kCompatLazyRefcounts | (1ull << 7));
  // An unknown extension of 5 bytes (padded to 8), then the end.
  StoreBe32(b.data() + 104, 0x12345678);
  StoreBe32(b.data() + 108, 5);
  StoreBe32(b.data() + 120, 0);
  absl::StatusOr<Qcow2Header> h = ParseQcow2Header(b, "img");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->incompatible_features, kIncompatDirty);
  EXPECT_EQ(DescribeFeatures(h->incompatible_features, h->compatible_features,
                             h->autoclear_features),
            "dirty, lazy refcounts, compatible bit 7");
}

TEST(Qcow2HeaderTest, RefusesAnExtensionRunningPastTheCluster) {
  std::vector<uint8_t> b = Encoded(SmallHeader());
  StoreBe32(b.data() + 104, 0x12345678);
  StoreBe32(b.data() + 108, 0xfffffff0);
  EXPECT_NE(Refusal(b).find("runs past byte 4096"), std::string::npos);
}

TEST(Qcow2HeaderTest, ReadsTheFeatureNameTable) {
  std::vector<uint8_t> b = Encoded(SmallHeader());
  StoreBe32(b.data() + 104, kExtFeatureNames);
  StoreBe32(b.data() + 108, 48);
  b[112] = 0;
  b[113] = 1;
  std::memcpy(b.data() + 114, "corrupt bit", 11);
  absl::StatusOr<Qcow2Header> h = ParseQcow2Header(b, "img");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->feature_names.size(), 1u);
  EXPECT_EQ(h->feature_names[0].name, "corrupt bit");
  EXPECT_EQ(h->feature_names[0].bit, 1);
}

TEST(Qcow2EntriesTest, RefcountsOfEveryWidthStayApart) {
  for (uint32_t order = 0; order <= 6; ++order) {
    std::vector<uint8_t> block(512, 0);
    const uint64_t count = 512 * 8 / (1u << order);
    const uint64_t max = MaxRefcount(order);
    for (uint64_t i = 0; i < count; ++i) {
      SetRefcount(block, i, order, (i * 7 + 1) & max);
    }
    for (uint64_t i = 0; i < count; ++i) {
      ASSERT_EQ(GetRefcount(block, i, order), (i * 7 + 1) & max)
          << "order " << order << " index " << i;
      const ByteRange r = RefcountBytes(i, order);
      EXPECT_LT(r.offset + r.length - 1, block.size());
    }
  }
}

TEST(Qcow2EntriesTest, DecodesL2Entries) {
  EXPECT_EQ(DecodeL2Entry(0, 3).kind, L2Kind::kUnallocated);
  EXPECT_EQ(DecodeL2Entry(1, 3).kind, L2Kind::kZero);
  EXPECT_TRUE(DecodeL2Entry(1, 2).reserved_bits);  // no zero flag in v2
  L2Entry data = DecodeL2Entry(EncodeL2Data(0x30000), 3);
  EXPECT_EQ(data.kind, L2Kind::kData);
  EXPECT_EQ(data.host_offset, 0x30000u);
  EXPECT_TRUE(data.copied);
  EXPECT_EQ(DecodeL2Entry(kL2Compressed | 0x1234, 3).kind, L2Kind::kCompressed);
  EXPECT_TRUE(DecodeL2Entry(0x30000 | 0x2, 3).reserved_bits);
}

TEST(Qcow2TableCacheTest, EvictsLeastRecentlyUsedAndCounts) {
  TableCache cache(2, 16);
  cache.Insert(100, std::vector<uint8_t>(16, 1));
  cache.Insert(200, std::vector<uint8_t>(16, 2));
  EXPECT_TRUE(cache.Entry64(100, 0).has_value());  // 100 is now newest
  cache.Insert(300, std::vector<uint8_t>(16, 3));  // evicts 200
  EXPECT_FALSE(cache.Entry64(200, 0).has_value());
  EXPECT_EQ(*cache.Entry64(300, 1), 0x0303030303030303u);
  EXPECT_EQ(cache.hits(), 2u);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Entry64(300, 2).has_value());  // past the table
}

TEST(Qcow2LayoutTest, RefusesOverlapsAndRegionsPastTheEnd) {
  Qcow2Header h = SmallHeader();
  EXPECT_TRUE(CheckQcow2Layout(h, 3 * 4096, "img").ok());
  absl::Status past = CheckQcow2Layout(h, 2 * 4096, "img").status();
  EXPECT_NE(past.message().find("runs past the end"), std::string::npos);
  h.l1_table_offset = 4096;  // onto the refcount table
  EXPECT_NE(CheckQcow2Layout(h, 3 * 4096, "img")
                .status()
                .message()
                .find("overlaps the L1 table"),
            std::string::npos);
  h.l1_table_offset = 0;  // onto the header
  h.l1_size = 1;
  EXPECT_NE(CheckQcow2Layout(h, 3 * 4096, "img")
                .status()
                .message()
                .find("overlaps the header"),
            std::string::npos);
}

// The mapper asks for the L2 table, gets it, answers; bad entries are
// errors of their range only.
TEST(Qcow2MappingTest, AsksForTheTableThenMapsAndRefusesBadEntries) {
  Qcow2Header h = SmallHeader();
  h.l1_size = 2;
  h.size = 2 * 512 * 4096;  // two L2 tables' worth
  std::vector<uint8_t> l1(16, 0), refcounts(4096, 0);
  StoreBe64(l1.data(), 3 * 4096 | kCopied);  // L2 table in cluster 3
  StoreBe64(l1.data() + 8, 7 * 4096 + 100);  // unaligned
  const uint64_t file_size = 8 * 4096;
  absl::StatusOr<std::unique_ptr<Qcow2Metadata>> md =
      BuildQcow2Metadata(h, file_size, l1, refcounts, "img");
  ASSERT_TRUE(md.ok()) << md.status();
  Qcow2Metadata& m = **md;

  absl::StatusOr<MapStep> step = MapVirtual(m, 4096 + 10);
  ASSERT_TRUE(step.ok());
  ASSERT_TRUE(std::holds_alternative<NeedTable>(*step));
  EXPECT_EQ(std::get<NeedTable>(*step).offset, 3u * 4096);

  std::vector<uint8_t> l2(4096, 0);
  StoreBe64(l2.data() + 8 * 1, EncodeL2Data(4 * 4096));   // cluster 1: data
  StoreBe64(l2.data() + 8 * 2, kL2Zero);                  // cluster 2: zero
  StoreBe64(l2.data() + 8 * 3, EncodeL2Data(20 * 4096));  // past the end
  StoreBe64(l2.data() + 8 * 4, EncodeL2Data(4 * 4096 + 512));  // unaligned
  StoreBe64(l2.data() + 8 * 5, EncodeL2Data(4096));            // refcount table
  StoreBe64(l2.data() + 8 * 6, EncodeL2Data(3 * 4096));  // its own L2 table
  m.l2_cache.Insert(3 * 4096, l2);

  step = MapVirtual(m, 4096 + 10);
  ASSERT_TRUE(step.ok());
  const Mapping& data = std::get<Mapping>(*step);
  EXPECT_EQ(data.kind, L2Kind::kData);
  EXPECT_EQ(data.host_offset, 4u * 4096 + 10);
  EXPECT_EQ(data.bytes, 4096u - 10);
  EXPECT_TRUE(data.writable_in_place);
  EXPECT_EQ(std::get<Mapping>(*MapVirtual(m, 2 * 4096)).kind, L2Kind::kZero);
  EXPECT_EQ(std::get<Mapping>(*MapVirtual(m, 0)).kind, L2Kind::kUnallocated);
  const char* faults[] = {"past the end", "not aligned",
                          "inside the refcount table", "inside an L2 table"};
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<MapStep> bad = MapVirtual(m, (3 + i) * 4096);
    ASSERT_FALSE(bad.ok()) << i;
    EXPECT_TRUE(absl::IsDataLoss(bad.status()));
    EXPECT_NE(bad.status().message().find(faults[i]), std::string::npos)
        << bad.status();
  }
  absl::StatusOr<MapStep> unaligned_l1 = MapVirtual(m, 512 * 4096);
  ASSERT_FALSE(unaligned_l1.ok());
  EXPECT_NE(unaligned_l1.status().message().find("L1 entry 1"),
            std::string::npos);
  EXPECT_TRUE(absl::IsOutOfRange(MapVirtual(m, h.size).status()));
}

// The crash-safe order, in the plans themselves: the new refcount block
// and the refcount come before the entries that name the clusters, those
// entries after a barrier, and a refcount drop after one.
TEST(Qcow2UpdateTest, PlansKeepTheCrashSafeOrder) {
  Qcow2Header h = SmallHeader();
  std::vector<uint8_t> l1(8, 0), refcounts(4096, 0);
  // Three clusters (header, refcount table, L1) counted by a block in 3.
  StoreBe64(refcounts.data(), 3 * 4096);
  absl::StatusOr<std::unique_ptr<Qcow2Metadata>> md =
      BuildQcow2Metadata(h, 4 * 4096, l1, refcounts, "img");
  ASSERT_TRUE(md.ok()) << md.status();
  Qcow2Metadata& m = **md;
  ClusterAllocator allocator(m);
  WritePlan plan;
  auto l2 = EnsureL2Table(m, allocator, 8192, plan);
  ASSERT_TRUE(l2.ok());
  ASSERT_TRUE(std::holds_alternative<NeedTable>(*l2));  // the block
  std::vector<uint8_t> block(4096, 0);
  for (int c = 0; c < 4; ++c) SetRefcount(block, c, 4, 1);
  m.refblock_cache.Insert(3 * 4096, block);
  l2 = EnsureL2Table(m, allocator, 8192, plan);
  ASSERT_TRUE(l2.ok() && std::holds_alternative<Done>(*l2));
  // refcount of the table (cluster 4), the zeroed table, then the L1 entry.
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].offset, 3u * 4096 + 2 * 4);
  EXPECT_EQ(plan[1].offset, 4u * 4096);
  EXPECT_EQ(plan[2].offset, h.l1_table_offset);
  EXPECT_TRUE(plan[2].barrier_before);
  EXPECT_EQ(LoadBe64(plan[2].bytes.data()), (4u * 4096) | kCopied);

  plan.clear();
  auto got = allocator.Allocate(plan);
  ASSERT_TRUE(got.ok() && std::holds_alternative<Allocated>(*got));
  EXPECT_EQ(std::get<Allocated>(*got).host_offset, 5u * 4096);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].offset, 3u * 4096 + 2 * 5);
  EXPECT_EQ(LoadBe16(plan[0].bytes.data()), 1);
  ASSERT_TRUE(SetL2Entry(m, 8192, EncodeL2Data(5 * 4096), plan).ok());
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_TRUE(plan[1].barrier_before);
  EXPECT_EQ(plan[1].offset, 4u * 4096 + 8 * 2);
  m.file_size = 6 * 4096;  // as if the plans and the data were written
  Mapping mapped = std::get<Mapping>(*MapVirtual(m, 8192 + 1));
  EXPECT_EQ(mapped.host_offset, 5u * 4096 + 1);

  plan.clear();
  ASSERT_TRUE(allocator.Release(5 * 4096, plan).ok());
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_TRUE(plan[0].barrier_before);
  EXPECT_EQ(LoadBe16(plan[0].bytes.data()), 0);
  // The freed cluster is the next one handed out.
  plan.clear();
  got = allocator.Allocate(plan);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::get<Allocated>(*got).host_offset, 5u * 4096);
}

// A cluster past what any refcount block covers gets a new block, placed
// in that cluster and counting itself, named by the table after a barrier.
TEST(Qcow2UpdateTest, ANewRefcountBlockCountsItself) {
  Qcow2Header h = SmallHeader();
  h.cluster_bits = 9;  // 256 refcounts per block
  h.refcount_table_offset = 512;
  h.l1_table_offset = 1024;
  h.l1_size = static_cast<uint32_t>(L1EntriesFor(h.size, 9));
  std::vector<uint8_t> l1(h.l1_size * 8, 0), refcounts(512, 0);
  const uint64_t file_size = 256 * 512;  // exactly one block's worth
  StoreBe64(refcounts.data(), 2048);
  absl::StatusOr<std::unique_ptr<Qcow2Metadata>> md =
      BuildQcow2Metadata(h, file_size, l1, refcounts, "img");
  ASSERT_TRUE(md.ok()) << md.status();
  ClusterAllocator allocator(**md);
  WritePlan plan;
  auto got = allocator.Allocate(plan);
  ASSERT_TRUE(got.ok() && std::holds_alternative<Allocated>(*got));
  EXPECT_EQ(std::get<Allocated>(*got).host_offset, 257u * 512);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].offset, 256u * 512);  // the block, in its own cluster
  EXPECT_EQ(GetRefcount(plan[0].bytes, 0, 4), 1u);
  EXPECT_EQ(plan[1].offset, 512u + 8);  // then the table names it
  EXPECT_TRUE(plan[1].barrier_before);
  EXPECT_EQ(plan[2].offset, 256u * 512 + 2);  // the data cluster's count
}

MetadataWrite W(uint64_t offset, std::vector<uint8_t> bytes, bool barrier) {
  return MetadataWrite{offset, std::move(bytes), barrier};
}

// Many changes share stages: a barrier puts a write one stage after the
// change's write before it, whatever other changes hold; a write of bytes
// an earlier write covers goes in that write's stage or later, after it.
TEST(Qcow2JournalTest, StagesKeepEachChangesBarriersAndLaterBytesLast) {
  MetadataJournal journal;
  // Two allocations: refcount, then (barrier) L2 entry.
  for (uint64_t i = 0; i < 2; ++i) {
    journal.Begin();
    journal.Add({W(4096 + 2 * i, {0, 1}, false)});
    journal.Add({W(8192 + 8 * i, {1, 2, 3, 4, 5, 6, 7, 8}, true)});
  }
  // A discard: L2 entry (barrier), then (barrier) the refcount drop.
  journal.Begin();
  journal.Add({W(8192 + 16, {0, 0, 0, 0, 0, 0, 0, 0}, true)});
  journal.Add({W(4096 + 4, {0, 0}, true)});
  // An allocation whose refcount shares that word: after the drop.
  journal.Begin();
  journal.Add({W(4096 + 6, {0, 1}, false)});
  journal.Add({W(8192 + 24, {9, 9, 9, 9, 9, 9, 9, 9}, true)});
  EXPECT_EQ(journal.writes(), 8u);

  std::vector<uint8_t> table(64, 0xee);
  journal.Overlay(8192 - 8, table);
  EXPECT_EQ(table[8], 1);   // the first L2 entry
  EXPECT_EQ(table[24], 0);  // the discard's entry
  EXPECT_EQ(table[32], 9);
  EXPECT_EQ(table[0], 0xee);  // not journalled: as read

  std::vector<MetadataJournal::Stage> stages = journal.Take();
  EXPECT_TRUE(journal.empty());
  ASSERT_EQ(stages.size(), 4u);
  ASSERT_EQ(stages[0].size(), 2u);  // both refcounts
  EXPECT_EQ(stages[0][0].offset, 4096u);
  EXPECT_EQ(stages[0][1].offset, 4098u);
  ASSERT_EQ(stages[1].size(), 3u);  // both L2 entries and the discard's
  EXPECT_EQ(stages[1][2].offset, 8192u + 16);
  ASSERT_EQ(stages[2].size(), 2u);  // the drop, then the shared word
  EXPECT_EQ(stages[2][0].offset, 4100u);
  EXPECT_EQ(stages[2][1].offset, 4102u);
  ASSERT_EQ(stages[3].size(), 1u);  // its entry, after its refcount
  EXPECT_EQ(stages[3][0].offset, 8192u + 24);
}

// A rewrite of exactly the bytes of the last write of them, in its stage,
// takes that write's place (one write per entry however often it changes);
// a rewrite that a later write of the same stage overlaps, one that goes
// in a later stage, or one of other bytes is added as a write of its own.
TEST(Qcow2JournalTest, RewriteOfTheSameBytesReplacesTheLastWrite) {
  MetadataJournal journal;
  auto entry = [](uint8_t v) { return std::vector<uint8_t>(16, v); };
  // An allocation: refcount, then (barrier) the 16-byte L2 entry (two
  // words); then the same entry rewritten twice (later subclusters of its
  // cluster).
  journal.Begin();
  journal.Add({W(4096, {0, 1}, false)});
  journal.Add({W(8192, entry(1), true)});
  for (uint8_t v : {2, 3}) {
    journal.Begin();
    journal.Add({W(8192, entry(v), true)});
  }
  EXPECT_EQ(journal.writes(), 2u);
  EXPECT_EQ(journal.bytes(), 18u);
  // A write over part of the entry's second word (other bytes): a write
  // of its own, after it.
  journal.Begin();
  journal.Add({W(8200, {7, 7, 7, 7}, true)});
  EXPECT_EQ(journal.writes(), 3u);
  // Now the second word's last write is that one: a rewrite of the whole
  // entry may not take the first write's place (it would land before the
  // part).
  journal.Begin();
  journal.Add({W(8192, entry(4), true)});
  EXPECT_EQ(journal.writes(), 4u);
  // A discard of the cluster: the entry (the last write of its bytes, in
  // its stage: replaced), then (barrier) the refcount drop, a later stage
  // than the refcount's write: a write of its own. The cluster allocated
  // again: its refcount replaces the drop, in the drop's stage.
  journal.Begin();
  journal.Add({W(8192, entry(0), true)});
  journal.Add({W(4096, {0, 0}, true)});
  EXPECT_EQ(journal.writes(), 5u);
  journal.Begin();
  journal.Add({W(4096, {0, 1}, false)});
  EXPECT_EQ(journal.writes(), 5u);

  std::vector<uint8_t> file(16, 0xee);
  journal.Overlay(8192, file);
  EXPECT_EQ(file, entry(0));
  std::vector<uint8_t> refcount(2, 0xee);
  journal.Overlay(4096, refcount);
  EXPECT_EQ(refcount, (std::vector<uint8_t>{0, 1}));

  std::vector<MetadataJournal::Stage> stages = journal.Take();
  ASSERT_EQ(stages.size(), 3u);
  ASSERT_EQ(stages[0].size(), 1u);  // the first refcount
  ASSERT_EQ(stages[1].size(), 3u);  // entry (3), part, entry (0)
  EXPECT_EQ(stages[1][0].bytes, entry(3));
  EXPECT_EQ(stages[1][1].offset, 8200u);
  EXPECT_EQ(stages[1][2].bytes, entry(0));
  ASSERT_EQ(stages[2].size(), 1u);  // the drop, replaced by the new count
  EXPECT_EQ(stages[2][0].bytes, (std::vector<uint8_t>{0, 1}));
}

// Coalesce: writes of one stage whose bytes overlap or touch become one
// write, later bytes over earlier ones; a gap keeps writes apart.
TEST(Qcow2JournalTest, CoalesceMergesTouchingWritesLaterBytesLast) {
  MetadataJournal::Stage stage = {
      W(120, {5, 5}, false),        // apart: a gap before 128
      W(136, {2, 2, 2, 2}, false),  // touches the next write's start
      W(128, {1, 1, 1, 1, 1, 1, 1, 1}, false),
      W(140, {3, 3, 3, 3}, false),  // touches 136..140
      W(130, {4, 4}, false),        // over the second write, later
      W(200, {9}, false),
  };
  MetadataJournal::Stage out = Coalesce(std::move(stage));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].offset, 120u);
  EXPECT_EQ(out[0].bytes, (std::vector<uint8_t>{5, 5}));
  EXPECT_EQ(out[1].offset, 128u);
  EXPECT_EQ(out[1].bytes, (std::vector<uint8_t>{1, 1, 4, 4, 1, 1, 1, 1, 2, 2, 2,
                                                2, 3, 3, 3, 3}));
  EXPECT_EQ(out[2].offset, 200u);
  EXPECT_FALSE(out[2].barrier_before);
  // An earlier write over a later one's bytes loses to it.
  MetadataJournal::Stage again = {W(0, {1, 1, 1, 1}, false),
                                  W(2, {2, 2}, false), W(0, {3}, false)};
  out = Coalesce(std::move(again));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].bytes, (std::vector<uint8_t>{3, 1, 2, 2}));
  // A later write at a lower offset wins over an earlier one above it.
  MetadataJournal::Stage lower = {W(2, {2, 2}, false),
                                  W(0, {1, 1, 1, 1}, false)};
  out = Coalesce(std::move(lower));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].bytes, (std::vector<uint8_t>{1, 1, 1, 1}));
}

// Published mappings are read back as published, per cluster, until
// withdrawn; compressed clusters are never published.
TEST(Qcow2PublishedMapTest, PublishesFindsAndWithdraws) {
  const uint64_t cluster = 4096;
  PublishedMap map(10 * cluster + 100, 2, 8, cluster);
  bool from_table = false;
  EXPECT_FALSE(map.Find(cluster + 5, from_table).has_value());
  Mapping data;
  data.kind = L2Kind::kData;
  data.host_cluster = 7 * cluster;
  data.host_offset = 7 * cluster + 5;
  data.writable_in_place = true;
  map.Publish(cluster + 5, data, true);
  std::optional<Mapping> got = map.Find(cluster + 9, from_table);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->kind, L2Kind::kData);
  EXPECT_EQ(got->host_offset, 7 * cluster + 9);
  EXPECT_EQ(got->bytes, cluster - 9);
  EXPECT_TRUE(got->writable_in_place);
  EXPECT_TRUE(from_table);
  // The last cluster ends with the disk.
  Mapping unallocated;
  map.Publish(10 * cluster, unallocated, false);
  got = map.Find(10 * cluster + 50, from_table);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->kind, L2Kind::kUnallocated);
  EXPECT_EQ(got->bytes, 50u);
  EXPECT_FALSE(from_table);
  map.Withdraw(cluster);
  EXPECT_FALSE(map.Find(cluster + 9, from_table).has_value());
  Mapping compressed;
  compressed.kind = L2Kind::kCompressed;
  map.Publish(2 * cluster, compressed, true);
  EXPECT_FALSE(map.Find(2 * cluster, from_table).has_value());
}

}  // namespace
}  // namespace pvdisk::image::qcow2
