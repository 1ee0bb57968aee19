// The NVMe queue pair end to end through a real shared region: the driver
// ring encodes, the device ring decodes what the backend gets (the shared
// segment form), completions come back with their results; the exact kick
// and interrupt decisions under plain and shadow doorbells; interrupt
// coalescing; positions past the queue's wrap.
#include <cerrno>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "nvme_memory.h"
#include "stats/clock.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::NvmeDevice;
using testing::NvmeMemory;
using testing::Tuples;

constexpr uint32_t kSize = 32;
constexpr uint32_t kDataPages = 704;
constexpr uint32_t kMaxSegments = 640;
// Request ids' table pages: 700.. (3 pages hold 640 SGL descriptors).
constexpr uint32_t kTablePages[] = {700, 701, 702};

DeviceLimits Limits() {
  DeviceLimits limits;
  limits.disk_sectors = 1 << 20;
  limits.data_pages = kDataPages;
  limits.max_segments = kMaxSegments;
  return limits;
}

RingConfig Config(NotifyMode notify, DataPointerMode data,
                  IrqCoalesce coalesce = {}) {
  RingConfig config(notify);
  config.data_pointer = data;
  config.coalesce = coalesce;
  return config;
}

class NvmeRingTest : public ::testing::TestWithParam<DataPointerMode> {
 protected:
  void Make(NotifyMode notify, IrqCoalesce coalesce = {}) {
    ASSERT_TRUE(memory_.ok());
    RingConfig config = Config(notify, GetParam(), coalesce);
    driver_ = std::make_unique<NvmeDriverRing>(memory_.front_ring(), kSize,
                                               memory_.front_data(), config);
    device_ = std::make_unique<NvmeDevice>(memory_, Limits(), config);
  }
  void SetUp() override { Make(NotifyMode::kEventIdx); }
  void TearDown() override {
    if (device_) {
      EXPECT_EQ(device_->grants.refused(), 0);
    }
  }

  RingRequest Request(BlockOp op, uint64_t id, uint64_t sector,
                      const std::vector<DataSegment>& segments) {
    RingRequest r;
    r.op = op;
    r.id = id;
    r.sector = sector;
    r.segments = segments.data();
    r.segment_count = static_cast<uint32_t>(segments.size());
    for (const DataSegment& s : segments) {
      r.num_sectors += s.last_sector - s.first_sector + 1u;
    }
    r.table_pages = kTablePages;
    r.table_page_count = 3;
    return r;
  }
  // Consumes every completion: (id, result) pairs.
  std::vector<std::pair<uint64_t, int>> Consume() {
    std::vector<std::pair<uint64_t, int>> got;
    int n = driver_->ConsumeResponses(
        [&](uint64_t id, int result) { got.emplace_back(id, result); });
    EXPECT_GE(n, 0);
    return got;
  }
  // Sends one data request and checks what the device decodes.
  void RoundTrip(BlockOp op, const std::vector<DataSegment>& segments,
                 bool indirect) {
    RingRequest r = Request(op, 7, 4096, segments);
    ASSERT_GT(driver_->FreeSlots(), 0u);
    driver_->Write(r);
    driver_->Publish();
    DeviceRequest got;
    ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
    EXPECT_EQ(got.op, op);
    EXPECT_EQ(got.sector, 4096u);
    EXPECT_EQ(got.num_sectors, r.num_sectors);
    EXPECT_EQ(Tuples(got.segments), Tuples(segments));
    EXPECT_EQ(got.indirect, indirect);
    device_->ring->PutResponse(got, 0);
    device_->ring->PublishResponses();
    EXPECT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{{7, 0}}));
  }

  NvmeMemory memory_{kSize, kDataPages};
  std::unique_ptr<NvmeDriverRing> driver_;
  std::unique_ptr<NvmeDevice> device_;
};

std::vector<DataSegment> Pages(uint32_t first, uint32_t count,
                               uint8_t last_sector = 7) {
  std::vector<DataSegment> segments;
  for (uint32_t i = 0; i < count; ++i) {
    segments.push_back(
        DataSegment{first + i, 0, i + 1 == count ? last_sector : uint8_t{7}});
  }
  return segments;
}

TEST_P(NvmeRingTest, DataSegmentsComeOutAsTheyWentIn) {
  const bool sgl = GetParam() == DataPointerMode::kSgl;
  // One partial page: PRP1 alone, or one data block.
  RoundTrip(BlockOp::kRead, {DataSegment{3, 2, 5}}, false);
  // Two pages, the first starting inside its page: PRP1 + PRP2; or two
  // data blocks (not contiguous) in a last segment.
  RoundTrip(BlockOp::kWrite, {DataSegment{9, 4, 7}, DataSegment{2, 0, 7}}, sgl);
  // Scattered pages: a PRP list; SGL: data blocks in one segment.
  RoundTrip(BlockOp::kRead,
            {DataSegment{40, 0, 7}, DataSegment{12, 0, 7},
             DataSegment{13, 0, 7}, DataSegment{90, 0, 3}},
            true);
  // Contiguous pages: a single SGL data block.
  RoundTrip(BlockOp::kWrite, Pages(100, 5, 0), !sgl ? true : false);
  // 600 scattered pages: a PRP list over two linked pages; SGL segments
  // linked over three pages.
  std::vector<DataSegment> many;
  for (uint32_t i = 0; i < 600; ++i) {
    many.push_back(DataSegment{(3 * i) % 700, 0, 7});  // never adjacent
  }
  many.back().last_sector = 0;
  RoundTrip(BlockOp::kRead, many, true);
}

TEST_P(NvmeRingTest, RangesAndFlushDecode) {
  struct Case {
    BlockOp op;
    uint64_t sectors;
  };
  for (Case c :
       {Case{BlockOp::kDiscard, 1 << 19}, Case{BlockOp::kWriteZeroes, 65536},
        Case{BlockOp::kFlush, 0}}) {
    RingRequest r = Request(c.op, 3, 128, {});
    r.num_sectors = c.sectors;
    driver_->Write(r);
    driver_->Publish();
    DeviceRequest got;
    ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
    EXPECT_EQ(got.op, c.op);
    if (c.op != BlockOp::kFlush) {
      EXPECT_EQ(got.sector, 128u);
      EXPECT_EQ(got.num_sectors, c.sectors);
    }
    device_->ring->PutResponse(got, 0);
    device_->ring->PublishResponses();
    EXPECT_EQ(Consume().size(), 1u);
  }
  EXPECT_EQ(driver_->MaxRangeSectors(BlockOp::kWriteZeroes), 65536u);
  EXPECT_EQ(driver_->MaxRangeSectors(BlockOp::kDiscard), 0xFFFFFFF8u);
}

TEST_P(NvmeRingTest, ResultsMapToStatusesAndBack) {
  for (int result : {0, -EIO, -EOPNOTSUPP, -ENOSPC}) {
    driver_->Write(Request(BlockOp::kRead, 11, 0, Pages(0, 1)));
    driver_->Publish();
    DeviceRequest got;
    ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
    device_->ring->PutResponse(got, result);
    device_->ring->PublishResponses();
    const int expected = result == 0             ? 0
                         : result == -EOPNOTSUPP ? -EOPNOTSUPP
                                                 : -EIO;
    EXPECT_EQ(Consume(),
              (std::vector<std::pair<uint64_t, int>>{{11, expected}}));
  }
}

TEST_P(NvmeRingTest, ShadowDoorbellsKickOnlyWhenTheEventIdxIsPassed) {
  DeviceRequest got;
  // Zeroed EventIdx: the first command kicks.
  driver_->Write(Request(BlockOp::kFlush, 1, 0, {}));
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  // The device has not re-armed: the next push is suppressed.
  driver_->Write(Request(BlockOp::kFlush, 2, 0, {}));
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);
  ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
  device_->ring->PutResponse(got, 0);
  ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
  device_->ring->PutResponse(got, 0);
  // The driver's CQ EventIdx is 0, passed by this publish: one interrupt.
  EXPECT_EQ(device_->ring->PublishResponses(), PushResult::kNotify);
  EXPECT_FALSE(device_->ring->FinalCheckForRequests());  // arms SQ EventIdx
  EXPECT_EQ(memory_.bells().sq_event, 2u);
  EXPECT_EQ(Consume().size(), 2u);
  EXPECT_FALSE(driver_->FinalCheckForResponses());  // arms CQ EventIdx
  EXPECT_EQ(memory_.bells().cq_event, 2u);
  driver_->Write(Request(BlockOp::kFlush, 3, 0, {}));
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
  device_->ring->PutResponse(got, 0);
  EXPECT_EQ(device_->ring->PublishResponses(), PushResult::kNotify);
  // Neither side re-armed: the next round trip notifies nobody.
  driver_->Write(Request(BlockOp::kFlush, 4, 0, {}));
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  ASSERT_TRUE(device_->ring->HasRequests());
  ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
  device_->ring->PutResponse(got, 0);
  EXPECT_EQ(device_->ring->PublishResponses(), PushResult::kSuppressed);
  // A final check that finds work says so instead of sleeping.
  EXPECT_TRUE(driver_->FinalCheckForResponses());
  EXPECT_EQ(Consume().size(), 2u);
}

TEST_P(NvmeRingTest, PlainDoorbellsAlwaysNotify) {
  Make(NotifyMode::kAlways);
  DeviceRequest got;
  for (int i = 0; i < 3; ++i) {
    driver_->Write(Request(BlockOp::kFlush, i, 0, {}));
    EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
    ASSERT_EQ(device_->ring->TakeRequest(&got), TakeResult::kValid);
    device_->ring->PutResponse(got, 0);
    EXPECT_EQ(device_->ring->PublishResponses(), PushResult::kNotify);
    EXPECT_EQ(Consume().size(), 1u);
  }
}

TEST_P(NvmeRingTest, PositionsWrapAndPhasesFlip) {
  // Batches of 5 over seven laps of the queue; the ring never holds more
  // than size - 1 commands.
  uint64_t next_id = 0;
  for (uint32_t batch = 0; batch < 7 * kSize / 5; ++batch) {
    for (int i = 0; i < 5; ++i) {
      driver_->Write(Request(BlockOp::kRead, next_id++, 8, Pages(i, 1)));
    }
    driver_->Publish();
    DeviceRequest got;
    std::vector<DeviceRequest> taken;
    while (device_->ring->TakeRequest(&got) == TakeResult::kValid) {
      taken.push_back(got);
    }
    ASSERT_EQ(taken.size(), 5u);
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
      device_->ring->PutResponse(*it, 0);  // out of order
    }
    device_->ring->PublishResponses();
    auto done = Consume();
    ASSERT_EQ(done.size(), 5u);
    EXPECT_EQ(done.front().first, next_id - 1);
  }
  // A full queue: size - 1 commands in flight, then no room.
  for (uint32_t i = 0; i + 1 < kSize; ++i) {
    driver_->Write(Request(BlockOp::kFlush, i, 0, {}));
  }
  EXPECT_EQ(driver_->FreeSlots(), 0u);
}

TEST_P(NvmeRingTest, CoalescingHoldsInterruptsUpToTheThreshold) {
  Make(NotifyMode::kAlways, IrqCoalesce{4, 25500});
  for (int i = 0; i < 6; ++i)
    driver_->Write(Request(BlockOp::kFlush, i, 0, {}));
  driver_->Publish();
  std::vector<DeviceRequest> taken(6);
  for (DeviceRequest& r : taken) {
    ASSERT_EQ(device_->ring->TakeRequest(&r), TakeResult::kValid);
  }
  auto answer = [&](int from, int to) {
    for (int i = from; i < to; ++i) device_->ring->PutResponse(taken[i], 0);
    return device_->ring->PublishResponses();
  };
  EXPECT_EQ(answer(0, 1), PushResult::kSuppressed);  // 1 pending
  EXPECT_EQ(answer(1, 3), PushResult::kSuppressed);  // 3 pending
  EXPECT_EQ(answer(3, 4), PushResult::kNotify);      // the threshold
  // 1 pending and 1 still in flight: held; the last one has nothing after
  // it to wait for.
  EXPECT_EQ(answer(4, 5), PushResult::kSuppressed);
  EXPECT_EQ(answer(5, 6), PushResult::kNotify);
  EXPECT_EQ(device_->stats.Snapshot().Get(Counter::irqs_coalesced), 3u);
  EXPECT_EQ(Consume().size(), 6u);
}

TEST_P(NvmeRingTest, CoalescingReleasesAfterTheTime) {
  Make(NotifyMode::kAlways, IrqCoalesce{100, 2000});
  for (int i = 0; i < 3; ++i)
    driver_->Write(Request(BlockOp::kFlush, i, 0, {}));
  driver_->Publish();
  std::vector<DeviceRequest> taken(3);
  for (DeviceRequest& r : taken) {
    ASSERT_EQ(device_->ring->TakeRequest(&r), TakeResult::kValid);
  }
  const uint64_t first = stats::MonotonicNanos();
  device_->ring->PutResponse(taken[0], 0);
  PushResult held = device_->ring->PublishResponses();
  if (held != PushResult::kSuppressed) {
    GTEST_SKIP() << "the first publish came more than 2 ms after the answer";
  }
  // The time, not a count, releases the next publish.
  while (stats::MonotonicNanos() - first < 2'100'000) {
  }
  device_->ring->PutResponse(taken[1], 0);
  EXPECT_EQ(device_->ring->PublishResponses(), PushResult::kNotify);
  device_->ring->PutResponse(taken[2], 0);
  EXPECT_EQ(device_->ring->PublishResponses(), PushResult::kNotify);
}

INSTANTIATE_TEST_SUITE_P(DataPointers, NvmeRingTest,
                         ::testing::Values(DataPointerMode::kPrp,
                                           DataPointerMode::kSgl),
                         [](const auto& info) {
                           return info.param == DataPointerMode::kPrp
                                      ? std::string("prp")
                                      : std::string("sgl");
                         });

}  // namespace
}  // namespace pvdisk::transport
