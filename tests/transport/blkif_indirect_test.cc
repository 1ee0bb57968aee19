// Indirect requests end to end over a real shared region: BlkifDriverRing
// writes requests of more than 11 segments as BLKIF_OP_INDIRECT with their
// segment lists in indirect pages, and BlkifDeviceRing reads the lists back
// through a GrantMapper (persistent, or mapped per request).
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "stats/queue_stats.h"
#include "transport/blkif/device_ring.h"
#include "transport/blkif/driver_ring.h"
#include "transport/blkif/format.h"
#include "transport/grant_mapper.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;

constexpr uint32_t kSlots = 32;
// Data pages 0..1023; indirect pages from 1024 on.
constexpr uint32_t kDataPages = 1040;
constexpr uint32_t kTablePage = 1024;
constexpr uint64_t kDiskSectors = uint64_t{1} << 24;

// Segment i of a request: page (i * 7 + salt) % 1024, varying sector ranges.
std::vector<DataSegment> MakeSegments(uint32_t count, uint32_t salt) {
  std::vector<DataSegment> segments;
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t first = static_cast<uint8_t>((i + salt) % 4);
    uint8_t last = static_cast<uint8_t>(4 + (i * 3 + salt) % 4);
    segments.push_back(DataSegment{(i * 7 + salt) % kTablePage, first, last});
  }
  return segments;
}

uint64_t SectorsOf(const std::vector<DataSegment>& segments) {
  uint64_t sectors = 0;
  for (const DataSegment& s : segments) {
    sectors += s.last_sector - s.first_sector + 1u;
  }
  return sectors;
}

// Parameter: persistent grants (true) or per-request grants.
class BlkifIndirectTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    driver_ = std::make_unique<BlkifDriverRing>(memory_.front_ring(), kSlots,
                                                memory_.front_data(),
                                                NotifyMode::kEventIdx);
    grants_ = GetParam() ? NewPersistentGrants(memory_.back_data())
                         : NewPerRequestGrants(memory_.region(),
                                               memory_.ring_bytes(), &stats_);
    BlkifDeviceLimits limits;
    limits.disk_sectors = kDiskSectors;
    limits.data_pages = kDataPages;
    limits.max_segments = 1024;
    device_ = std::make_unique<BlkifDeviceRing>(memory_.back_ring(), kSlots,
                                                grants_.get(), limits,
                                                NotifyMode::kEventIdx);
  }

  void Write(BlockOp op, uint64_t id, uint64_t sector,
             const std::vector<DataSegment>& segments,
             const std::vector<uint32_t>& table_pages) {
    RingRequest request;
    request.op = op;
    request.id = id;
    request.sector = sector;
    request.num_sectors = SectorsOf(segments);
    request.segments = segments.data();
    request.segment_count = static_cast<uint32_t>(segments.size());
    request.table_pages = table_pages.data();
    request.table_page_count = static_cast<uint32_t>(table_pages.size());
    driver_->Write(request);
  }

  std::vector<std::pair<uint64_t, int>> Consume() {
    std::vector<std::pair<uint64_t, int>> responses;
    driver_->ConsumeResponses(
        [&](uint64_t id, int result) { responses.emplace_back(id, result); });
    return responses;
  }

  uint64_t Get(Counter c) { return stats_.Snapshot().Get(c); }

  testing::RingMemory memory_{kSlots, kDataPages};
  stats::QueueStats stats_;
  std::unique_ptr<GrantMapper> grants_;
  std::unique_ptr<BlkifDriverRing> driver_;
  std::unique_ptr<BlkifDeviceRing> device_;
};

TEST_P(BlkifIndirectTest, HundredAndSixHundredSegmentsRoundTrip) {
  const std::vector<DataSegment> hundred = MakeSegments(100, 1);
  const std::vector<DataSegment> six_hundred = MakeSegments(600, 2);
  // Each request has its own table pages, as FrontendQueue reserves them
  // per request id; the 600-segment one needs two.
  Write(BlockOp::kWrite, 3, 1000, hundred, {kTablePage});
  Write(BlockOp::kRead, 4, 50000, six_hundred,
        {kTablePage + 2, kTablePage + 3});
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);

  // On the wire: BLKIF_OP_INDIRECT slots naming the table pages, and the
  // lists in those pages.
  const blkif::IndirectRequest& first = memory_.slot(0)->indirect;
  EXPECT_EQ(first.operation, blkif::kOpIndirect);
  EXPECT_EQ(first.indirect_op, blkif::kOpWrite);
  EXPECT_EQ(first.nr_segments, 100u);
  EXPECT_EQ(first.id, 3u);
  EXPECT_EQ(first.sector_number, 1000u);
  EXPECT_EQ(first.indirect_grefs[0], kTablePage);
  const blkif::IndirectRequest& second = memory_.slot(1)->indirect;
  EXPECT_EQ(second.operation, blkif::kOpIndirect);
  EXPECT_EQ(second.indirect_op, blkif::kOpRead);
  EXPECT_EQ(second.nr_segments, 600u);
  EXPECT_EQ(second.indirect_grefs[0], kTablePage + 2);
  EXPECT_EQ(second.indirect_grefs[1], kTablePage + 3);
  const auto* page = reinterpret_cast<const blkif::Segment*>(
      memory_.front_data() + size_t{kTablePage + 3} * blkif::kPageSize);
  EXPECT_EQ(page[0].gref, six_hundred[512].page);
  EXPECT_EQ(page[87].first_sect, six_hundred[599].first_sector);
  EXPECT_EQ(page[87].last_sect, six_hundred[599].last_sector);

  DeviceRequest a;
  ASSERT_EQ(device_->TakeRequest(&a), TakeResult::kValid);
  EXPECT_TRUE(a.indirect);
  EXPECT_EQ(a.id, 3u);
  EXPECT_EQ(a.op, BlockOp::kWrite);
  EXPECT_EQ(a.wire_op, blkif::kOpWrite);
  EXPECT_EQ(a.sector, 1000u);
  EXPECT_EQ(a.num_sectors, SectorsOf(hundred));
  EXPECT_EQ(testing::Tuples(a.segments), testing::Tuples(hundred));

  DeviceRequest b;
  ASSERT_EQ(device_->TakeRequest(&b), TakeResult::kValid);
  EXPECT_TRUE(b.indirect);
  EXPECT_EQ(b.id, 4u);
  EXPECT_EQ(b.op, BlockOp::kRead);
  EXPECT_EQ(b.wire_op, blkif::kOpRead);
  EXPECT_EQ(b.sector, 50000u);
  EXPECT_EQ(b.num_sectors, SectorsOf(six_hundred));
  EXPECT_EQ(testing::Tuples(b.segments), testing::Tuples(six_hundred));
  DeviceRequest none;
  EXPECT_EQ(device_->TakeRequest(&none), TakeResult::kNone);

  // Responses carry the indirect operation (READ/WRITE), not INDIRECT.
  device_->PutResponse(a, 0);
  device_->PutResponse(b, -EIO);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(memory_.slot(0)->rsp.operation, blkif::kOpWrite);
  EXPECT_EQ(memory_.slot(1)->rsp.operation, blkif::kOpRead);
  EXPECT_EQ(memory_.slot(1)->rsp.status, blkif::kRspError);
  EXPECT_EQ(Consume(),
            (std::vector<std::pair<uint64_t, int>>{{3, 0}, {4, -EIO}}));
  EXPECT_EQ(driver_->FreeSlots(), kSlots);

  // Reading the lists mapped one indirect page at a time, and unmapped it.
  const uint64_t expected_maps = GetParam() ? 0 : 3;
  EXPECT_EQ(Get(Counter::grant_maps), expected_maps);
  EXPECT_EQ(Get(Counter::grant_unmaps), expected_maps);
}

TEST_P(BlkifIndirectTest, ElevenSegmentsOrFewerStayDirect) {
  const std::vector<DataSegment> eleven = MakeSegments(11, 3);
  const std::vector<DataSegment> twelve = MakeSegments(12, 4);
  Write(BlockOp::kRead, 1, 0, eleven, {kTablePage});
  Write(BlockOp::kRead, 2, 0, twelve, {kTablePage + 1});
  driver_->Publish();
  EXPECT_EQ(memory_.slot(0)->req.operation, blkif::kOpRead);
  EXPECT_EQ(memory_.slot(0)->req.nr_segments, 11u);
  EXPECT_EQ(memory_.slot(1)->indirect.operation, blkif::kOpIndirect);
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  EXPECT_FALSE(request.indirect);
  EXPECT_EQ(testing::Tuples(request.segments), testing::Tuples(eleven));
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  EXPECT_TRUE(request.indirect);
  EXPECT_EQ(testing::Tuples(request.segments), testing::Tuples(twelve));
  EXPECT_EQ(Get(Counter::grant_maps), GetParam() ? 0u : 1u);
}

TEST_P(BlkifIndirectTest, ManyIndirectRequestsWrapTheRing) {
  uint64_t id = 0;
  for (int cycle = 0; cycle < 200; ++cycle) {
    const uint32_t count = 12 + static_cast<uint32_t>(cycle * 37) % 1013;
    const std::vector<DataSegment> segments = MakeSegments(count, cycle);
    const uint32_t table = kTablePage + (cycle % 4) * 2;
    Write(cycle % 2 ? BlockOp::kWrite : BlockOp::kRead, id, cycle, segments,
          {table, table + 1});
    ASSERT_NE(driver_->Publish(), PushResult::kNothing);
    DeviceRequest request;
    ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid) << cycle;
    ASSERT_EQ(request.id, id);
    ASSERT_TRUE(request.indirect);
    ASSERT_EQ(testing::Tuples(request.segments), testing::Tuples(segments))
        << cycle;
    device_->PutResponse(request, 0);
    device_->PublishResponses();
    ASSERT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{{id, 0}}));
    ++id;
  }
  EXPECT_EQ(Get(Counter::grant_maps), Get(Counter::grant_unmaps));
}

INSTANTIATE_TEST_SUITE_P(Grants, BlkifIndirectTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "persistent" : "per_request";
                         });

}  // namespace
}  // namespace pvdisk::transport
