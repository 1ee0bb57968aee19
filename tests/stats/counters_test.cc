#include "stats/counters.h"

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::stats {
namespace {

// The column names are a user-visible interface (the stats table and
// stats.json), so they are pinned here, in order.
const std::vector<std::string_view>& ExpectedNames() {
  static const auto* names = new std::vector<std::string_view>{
      "fuse_reads",
      "fuse_writes",
      "reads_done",
      "writes_done",
      "read_lat_ns",
      "write_lat_ns",
      "reqs_read",
      "reqs_write",
      "reqs_flush",
      "reqs_discard",
      "sectors_read",
      "sectors_written",
      "segments",
      "indirect_reqs",
      "merges_read",
      "merges_write",
      "splits",
      "ring_full",
      "dispatch_busy",
      "plugs",
      "inflight",
      "inflight_max",
      "inflight_ns",
      "engine_inflight_max",
      "kicks_sent",
      "kicks_suppressed",
      "irqs_sent",
      "irqs_suppressed",
      "irqs_coalesced",
      "final_check_again",
      "polls_hit",
      "grant_maps",
      "grant_unmaps",
      "errors",
      "invalid_reqs",
      "refused_header_writes",
      "zero_copy_ios",
      "bounced_reqs",
      "engine_restarts",
      "backend_restarts",
      "reissued_reqs",
      "l2_hits",
      "l2_misses",
      "meta_reads",
      "meta_writes",
      "clusters_allocated",
      "cow_bytes",
      "compressed_reads",
      "unsafe_bytes",
      "unsafe_bytes_max",
      "flushes",
      "full_flushes",
      "full_waits",
      "log_entries",
      "log_bytes",
  };
  return *names;
}

TEST(CountersTest, NamesMatchTheDocumentedColumnsInOrder) {
  ASSERT_EQ(kNumCounters, ExpectedNames().size());
  for (size_t i = 0; i < kNumCounters; ++i) {
    EXPECT_EQ(kCounterInfo[i].name, ExpectedNames()[i]) << "index " << i;
  }
}

TEST(CountersTest, EnumIndexMatchesInfoTable) {
  EXPECT_EQ(Index(Counter::fuse_reads), 0u);
  EXPECT_EQ(kCounterInfo[Index(Counter::reqs_write)].name, "reqs_write");
  EXPECT_EQ(kCounterInfo[Index(Counter::inflight)].name, "inflight");
  EXPECT_EQ(kCounterInfo[Index(Counter::inflight_max)].name, "inflight_max");
  EXPECT_EQ(kCounterInfo[Index(Counter::indirect_reqs)].name, "indirect_reqs");
  EXPECT_EQ(kCounterInfo[Index(Counter::polls_hit)].name, "polls_hit");
  EXPECT_EQ(kCounterInfo[Index(Counter::grant_maps)].name, "grant_maps");
  EXPECT_EQ(kCounterInfo[Index(Counter::grant_unmaps)].name, "grant_unmaps");
  EXPECT_EQ(Index(Counter::grant_unmaps), Index(Counter::grant_maps) + 1);
  EXPECT_EQ(kCounterInfo[Index(Counter::errors)].name, "errors");
  EXPECT_EQ(Index(Counter::log_bytes), kNumCounters - 1);
}

TEST(CountersTest, KindsAndMeanings) {
  std::set<std::string_view> seen;
  for (const CounterInfo& info : kCounterInfo) {
    EXPECT_TRUE(seen.insert(info.name).second) << "duplicate " << info.name;
    EXPECT_FALSE(info.meaning.empty()) << info.name;
    CounterKind expected = CounterKind::kCount;
    if (info.name == "inflight" || info.name == "unsafe_bytes") {
      expected = CounterKind::kGauge;
    }
    if (info.name == "inflight_max" || info.name == "engine_inflight_max" ||
        info.name == "unsafe_bytes_max") {
      expected = CounterKind::kMax;
    }
    EXPECT_EQ(info.kind, expected) << info.name;
  }
}

}  // namespace
}  // namespace pvdisk::stats
