// stats.json read back (what `pvdisk stat` and `pvdisk list` use) gives
// what RenderJson wrote.
#include "stats/stats_document.h"

#include "gtest/gtest.h"
#include "stats/render.h"

namespace pvdisk::stats {
namespace {

TEST(StatsDocumentTest, RoundTripsCountersHistogramsAndClock) {
  QueueStats q0;
  q0.Add(Counter::reqs_read, 7);
  q0.Add(Counter::inflight_ns, uint64_t{1} << 60);  // beyond a double's 53 bits
  q0.RecordLatency(Direction::kRead, 1234);
  q0.RecordLatency(Direction::kRead, 9'876'543);
  q0.RecordLatency(Direction::kWrite, 20'000);
  QueueStats q1;
  q1.Add(Counter::errors, 2);
  DiskReport disk;
  disk.name = "disk0.img";
  disk.config = {{"image", "/x/disk0.img"}, {"size", "4096"}};
  disk.queues = {q0.Snapshot(), q1.Snapshot()};
  ReportClock clock{.now_ns = 5000, .since_ns = 1000, .daemon_pid = 77};

  absl::StatusOr<StatsDocument> document =
      ParseStatsDocument(RenderJson({disk}, clock));
  ASSERT_TRUE(document.ok()) << document.status();
  EXPECT_EQ(document->now_ns, 5000u);
  EXPECT_EQ(document->since_ns, 1000u);
  EXPECT_EQ(document->daemon_pid, 77);
  ASSERT_EQ(document->disks.size(), 1u);
  const DiskDocument& read = document->disks[0];
  EXPECT_EQ(read.name, "disk0.img");
  EXPECT_EQ(read.config.at("image"), "/x/disk0.img");
  EXPECT_EQ(read.config.at("size"), "4096");
  ASSERT_EQ(read.queues.size(), 2u);
  for (size_t q = 0; q < 2; ++q) {
    EXPECT_EQ(read.queues[q].values, disk.queues[q].values) << q;
    EXPECT_EQ(read.queues[q].read_latency, disk.queues[q].read_latency) << q;
    EXPECT_EQ(read.queues[q].write_latency, disk.queues[q].write_latency) << q;
  }
  QueueSnapshot total = Total(disk.queues.data(), disk.queues.size());
  EXPECT_EQ(read.total.values, total.values);
  EXPECT_EQ(read.total.read_latency, total.read_latency);
}

TEST(StatsDocumentTest, RefusesWhatIsNotStatsJson) {
  EXPECT_FALSE(ParseStatsDocument("not json").ok());
  EXPECT_FALSE(ParseStatsDocument("{\"disks\": 3}").ok());
  EXPECT_FALSE(ParseStatsDocument("[]").ok());
}

}  // namespace
}  // namespace pvdisk::stats
