// BlkifDriverRing and BlkifDeviceRing talking through a real shared region:
// requests and responses round trip, and the Xen notification rules decide
// exactly when a kick or an interrupt is needed.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "transport/blkif/device_ring.h"
#include "transport/blkif/driver_ring.h"
#include "transport/blkif/format.h"
#include "transport/grant_mapper.h"

namespace pvdisk::transport {
namespace {

constexpr uint32_t kSlots = 32;
constexpr uint32_t kDataPages = 16;
constexpr uint64_t kDiskSectors = uint64_t{1} << 20;

class BlkifRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    grants_ = NewPersistentGrants(memory_.back_data());
    MakeRings(NotifyMode::kEventIdx, NotifyMode::kEventIdx);
  }

  // (Re)initialises the shared ring with a fresh pair of ends.
  void MakeRings(NotifyMode driver_mode, NotifyMode device_mode) {
    device_.reset();
    driver_ = std::make_unique<BlkifDriverRing>(
        memory_.front_ring(), kSlots, memory_.front_data(), driver_mode);
    BlkifDeviceLimits limits;
    limits.disk_sectors = kDiskSectors;
    limits.data_pages = kDataPages;
    device_ = std::make_unique<BlkifDeviceRing>(
        memory_.back_ring(), kSlots, grants_.get(), limits, device_mode);
  }

  // Writes (without publishing) a one-page read or write of page `page`.
  void WritePageRequest(BlockOp op, uint64_t id, uint64_t sector,
                        uint32_t page) {
    DataSegment segment{page, 0, 7};
    RingRequest request;
    request.op = op;
    request.id = id;
    request.sector = sector;
    request.num_sectors = 8;
    request.segments = &segment;
    request.segment_count = 1;
    driver_->Write(request);
  }

  DeviceRequest TakeValid() {
    DeviceRequest request;
    EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
    return request;
  }

  std::vector<std::pair<uint64_t, int>> Consume() {
    std::vector<std::pair<uint64_t, int>> responses;
    int consumed = driver_->ConsumeResponses(
        [&](uint64_t id, int result) { responses.emplace_back(id, result); });
    EXPECT_EQ(consumed, static_cast<int>(responses.size()));
    return responses;
  }

  testing::RingMemory memory_{kSlots, kDataPages};
  std::unique_ptr<GrantMapper> grants_;
  std::unique_ptr<BlkifDriverRing> driver_;
  std::unique_ptr<BlkifDeviceRing> device_;
};

TEST_F(BlkifRingTest, InitialisesSharedHeader) {
  EXPECT_EQ(memory_.header()->req_prod, 0u);
  EXPECT_EQ(memory_.header()->rsp_prod, 0u);
  EXPECT_EQ(memory_.header()->req_event, 1u);
  EXPECT_EQ(memory_.header()->rsp_event, 1u);
  EXPECT_EQ(driver_->FreeSlots(), kSlots);
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kNone);
}

TEST_F(BlkifRingTest, ReadRequestAndResponseRoundTrip) {
  DataSegment segments[] = {{3, 0, 7}, {4, 0, 3}, {9, 2, 5}};
  RingRequest request;
  request.op = BlockOp::kRead;
  request.id = 7;
  request.sector = 100;
  request.num_sectors = 8 + 4 + 4;
  request.segments = segments;
  request.segment_count = 3;
  driver_->Write(request);
  EXPECT_EQ(driver_->FreeSlots(), kSlots - 1);
  // Not visible until published.
  DeviceRequest taken;
  EXPECT_EQ(device_->TakeRequest(&taken), TakeResult::kNone);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  EXPECT_EQ(memory_.header()->req_prod, 1u);

  ASSERT_EQ(device_->TakeRequest(&taken), TakeResult::kValid);
  EXPECT_EQ(taken.id, 7u);
  EXPECT_EQ(taken.wire_op, blkif::kOpRead);
  EXPECT_EQ(taken.op, BlockOp::kRead);
  EXPECT_EQ(taken.sector, 100u);
  EXPECT_EQ(taken.num_sectors, 16u);
  EXPECT_FALSE(taken.indirect);
  // The segments arrive exactly as written, in order.
  EXPECT_EQ(testing::Tuples(taken.segments),
            testing::Tuples(segments, std::size(segments)));
  EXPECT_EQ(device_->TakeRequest(&taken), TakeResult::kNone);

  // The backend fills the third segment's sectors through its own mapping;
  // the frontend sees them in its mapping.
  PageMapping mapping;
  ASSERT_TRUE(grants_->MapPages(taken.segments[2].page, 1, &mapping));
  std::memset(mapping.address + taken.segments[2].first_sector * 512, 0xAB,
              4 * 512);
  grants_->UnmapPages(mapping);
  device_->PutResponse(taken, 0);
  EXPECT_TRUE(Consume().empty());  // not published yet
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(memory_.header()->rsp_prod, 1u);
  EXPECT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{{7, 0}}));
  EXPECT_EQ(memory_.front_data()[9 * 4096 + 2 * 512], 0xAB);
  EXPECT_EQ(memory_.front_data()[9 * 4096 + 6 * 512 - 1], 0xAB);
  EXPECT_EQ(memory_.front_data()[9 * 4096 + 6 * 512], 0);
  EXPECT_EQ(driver_->FreeSlots(), kSlots);
}

TEST_F(BlkifRingTest, NonDataOperationsRoundTrip) {
  RingRequest flush;
  flush.op = BlockOp::kFlush;
  flush.id = 1;
  RingRequest discard;
  discard.op = BlockOp::kDiscard;
  discard.id = 2;
  discard.sector = 4096;
  discard.num_sectors = 64;
  RingRequest zeroes = discard;
  zeroes.op = BlockOp::kWriteZeroes;
  zeroes.id = 3;
  driver_->Write(flush);
  driver_->Write(discard);
  driver_->Write(zeroes);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);

  DeviceRequest a = TakeValid();
  EXPECT_EQ(a.op, BlockOp::kFlush);
  EXPECT_EQ(a.wire_op, blkif::kOpFlushDiskCache);
  EXPECT_TRUE(a.segments.empty());
  DeviceRequest b = TakeValid();
  EXPECT_EQ(b.op, BlockOp::kDiscard);
  EXPECT_EQ(b.wire_op, blkif::kOpDiscard);
  EXPECT_EQ(b.sector, 4096u);
  EXPECT_EQ(b.num_sectors, 64u);
  DeviceRequest c = TakeValid();
  EXPECT_EQ(c.op, BlockOp::kWriteZeroes);
  EXPECT_EQ(c.wire_op, blkif::kOpDiscard);
  EXPECT_EQ(c.num_sectors, 64u);

  // Status mapping: 0 -> 0, EOPNOTSUPP -> EOPNOTSUPP, anything else -> EIO.
  device_->PutResponse(a, -EOPNOTSUPP);
  device_->PutResponse(b, -ENOSPC);
  device_->PutResponse(c, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{
                           {1, -EOPNOTSUPP}, {2, -EIO}, {3, 0}}));
  EXPECT_EQ(memory_.slot(1)->rsp.status, blkif::kRspError);
  EXPECT_EQ(memory_.slot(1)->rsp.operation, blkif::kOpDiscard);
  EXPECT_EQ(memory_.slot(0)->rsp.status, blkif::kRspEopnotsupp);
}

TEST_F(BlkifRingTest, RequestNotifyDecisions) {
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);
  WritePageRequest(BlockOp::kRead, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);  // req_event = 1
  WritePageRequest(BlockOp::kRead, 1, 8, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  WritePageRequest(BlockOp::kRead, 2, 16, 2);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);

  // The backend takes everything and, before sleeping, asks to be kicked.
  TakeValid();
  TakeValid();
  TakeValid();
  EXPECT_FALSE(device_->FinalCheckForRequests());
  EXPECT_EQ(memory_.header()->req_event, 4u);

  WritePageRequest(BlockOp::kWrite, 3, 24, 3);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  WritePageRequest(BlockOp::kWrite, 4, 32, 4);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);

  // A backend that is still busy (no final check) is not kicked again.
  TakeValid();
  WritePageRequest(BlockOp::kWrite, 5, 40, 5);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
}

TEST_F(BlkifRingTest, BatchedPushNotifiesOnce) {
  for (uint32_t i = 0; i < 5; ++i) {
    WritePageRequest(BlockOp::kRead, i, i * 8, i);
  }
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  EXPECT_EQ(memory_.header()->req_prod, 5u);
  for (int i = 0; i < 2; ++i) TakeValid();
  // Two taken, three still waiting: the final check finds work.
  EXPECT_TRUE(device_->FinalCheckForRequests());
  for (int i = 0; i < 3; ++i) TakeValid();
  EXPECT_FALSE(device_->FinalCheckForRequests());
  EXPECT_EQ(memory_.header()->req_event, 6u);
  // The event index lies in the middle of the next batch: one kick.
  for (uint32_t i = 5; i < 9; ++i) {
    WritePageRequest(BlockOp::kRead, i, i * 8, i);
  }
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
}

TEST_F(BlkifRingTest, FinalCheckForRequestsSeesWorkThatSlippedIn) {
  WritePageRequest(BlockOp::kRead, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  TakeValid();
  // The frontend publishes between the backend's last take and its check.
  WritePageRequest(BlockOp::kRead, 1, 8, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  EXPECT_TRUE(device_->FinalCheckForRequests());
  DeviceRequest request = TakeValid();
  EXPECT_EQ(request.id, 1u);
  EXPECT_FALSE(device_->FinalCheckForRequests());
}

TEST_F(BlkifRingTest, ResponseNotifyDecisions) {
  for (uint32_t i = 0; i < 6; ++i) {
    WritePageRequest(BlockOp::kRead, i, i * 8, i);
  }
  driver_->Publish();
  std::vector<DeviceRequest> taken;
  for (int i = 0; i < 6; ++i) taken.push_back(TakeValid());

  EXPECT_EQ(device_->PublishResponses(), PushResult::kNothing);
  device_->PutResponse(taken[0], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);  // rsp_event 1
  device_->PutResponse(taken[1], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);

  // The frontend consumes and, before sleeping, asks for an interrupt.
  EXPECT_EQ(Consume().size(), 2u);
  EXPECT_FALSE(driver_->FinalCheckForResponses());
  EXPECT_EQ(memory_.header()->rsp_event, 3u);
  device_->PutResponse(taken[2], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(taken[3], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);

  // A response that slipped in before the frontend's final check.
  EXPECT_EQ(Consume().size(), 2u);
  device_->PutResponse(taken[4], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);
  EXPECT_TRUE(driver_->FinalCheckForResponses());
  EXPECT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{{4, 0}}));
  EXPECT_FALSE(driver_->FinalCheckForResponses());
  device_->PutResponse(taken[5], -EIO);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{{5, -EIO}}));
}

TEST_F(BlkifRingTest, FreeSlotsTracksOutstandingRequests) {
  for (uint32_t i = 0; i < kSlots; ++i) {
    EXPECT_EQ(driver_->FreeSlots(), kSlots - i);
    WritePageRequest(BlockOp::kRead, i, 0, i % kDataPages);
  }
  EXPECT_EQ(driver_->FreeSlots(), 0u);
  driver_->Publish();
  std::vector<DeviceRequest> taken;
  for (uint32_t i = 0; i < kSlots; ++i) taken.push_back(TakeValid());
  DeviceRequest none;
  EXPECT_EQ(device_->TakeRequest(&none), TakeResult::kNone);
  // Taking frees nothing for the frontend; consuming responses does.
  EXPECT_EQ(driver_->FreeSlots(), 0u);
  for (const DeviceRequest& request : taken) device_->PutResponse(request, 0);
  device_->PublishResponses();
  EXPECT_EQ(driver_->FreeSlots(), 0u);
  EXPECT_EQ(Consume().size(), kSlots);
  EXPECT_EQ(driver_->FreeSlots(), kSlots);
}

TEST_F(BlkifRingTest, DriverRefusesImpossibleResponseIndex) {
  WritePageRequest(BlockOp::kRead, 0, 0, 0);
  driver_->Publish();
  // A backend claiming 33 responses on a 32-slot ring.
  memory_.header()->rsp_prod = kSlots + 1;
  int calls = 0;
  EXPECT_EQ(driver_->ConsumeResponses([&](uint64_t, int) { ++calls; }),
            -EPROTO);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(driver_->FreeSlots(), kSlots - 1);
}

TEST_F(BlkifRingTest, ManyCyclesWrapTheSlotsAndKeepNotifying) {
  constexpr int kCycles = 10000;
  const int results[] = {0, -EIO, -EOPNOTSUPP, -EINVAL};
  uint64_t next_id = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    const uint32_t batch = 1 + static_cast<uint32_t>(cycle) % 7;
    const uint64_t first_id = next_id;
    for (uint32_t b = 0; b < batch; ++b, ++next_id) {
      WritePageRequest(next_id % 2 ? BlockOp::kWrite : BlockOp::kRead, next_id,
                       (next_id % 1000) * 8,
                       static_cast<uint32_t>(next_id % kDataPages));
    }
    // Both sides did their final check before "sleeping", so the first push
    // of every batch must notify.
    ASSERT_EQ(driver_->Publish(), PushResult::kNotify) << "cycle " << cycle;

    std::vector<DeviceRequest> taken;
    for (uint32_t b = 0; b < batch; ++b) {
      DeviceRequest request;
      ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
      const uint64_t id = first_id + b;
      ASSERT_EQ(request.id, id);
      ASSERT_EQ(request.op, id % 2 ? BlockOp::kWrite : BlockOp::kRead);
      ASSERT_EQ(request.sector, (id % 1000) * 8);
      ASSERT_EQ(request.segments.size(), 1u);
      ASSERT_EQ(request.segments[0].page, id % kDataPages);
      ASSERT_EQ(request.segments[0].first_sector, 0u);
      ASSERT_EQ(request.segments[0].last_sector, 7u);
      taken.push_back(std::move(request));
    }
    DeviceRequest none;
    ASSERT_EQ(device_->TakeRequest(&none), TakeResult::kNone);
    ASSERT_FALSE(device_->FinalCheckForRequests());

    for (const DeviceRequest& request : taken) {
      device_->PutResponse(request, results[request.id % 4]);
    }
    ASSERT_EQ(device_->PublishResponses(), PushResult::kNotify)
        << "cycle " << cycle;
    std::vector<std::pair<uint64_t, int>> responses = Consume();
    ASSERT_EQ(responses.size(), batch);
    for (uint32_t b = 0; b < batch; ++b) {
      const uint64_t id = first_id + b;
      const int expected = results[id % 4] == -EINVAL ? -EIO : results[id % 4];
      ASSERT_EQ(responses[b], std::make_pair(id, expected));
    }
    ASSERT_FALSE(driver_->FinalCheckForResponses());
    ASSERT_EQ(driver_->FreeSlots(), kSlots);
  }
  EXPECT_EQ(memory_.header()->req_prod, static_cast<uint32_t>(next_id));
  EXPECT_EQ(memory_.header()->rsp_prod, static_cast<uint32_t>(next_id));
  EXPECT_GT(next_id, 100u * kSlots);
}

// NotifyMode::kAlways: every push that published something notifies, whether
// or not the peer asked (did its final check) -- on both sides.
TEST_F(BlkifRingTest, AlwaysModeNotifiesOnEveryPush) {
  MakeRings(NotifyMode::kAlways, NotifyMode::kAlways);
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);
  WritePageRequest(BlockOp::kRead, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  // The backend has not done its final check: event-idx would suppress.
  WritePageRequest(BlockOp::kRead, 1, 8, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  WritePageRequest(BlockOp::kWrite, 2, 16, 2);
  WritePageRequest(BlockOp::kWrite, 3, 24, 3);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);

  std::vector<DeviceRequest> taken;
  for (int i = 0; i < 4; ++i) taken.push_back(TakeValid());
  // With the backend's final check done, still kNotify.
  EXPECT_FALSE(device_->FinalCheckForRequests());
  WritePageRequest(BlockOp::kRead, 4, 32, 4);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  WritePageRequest(BlockOp::kRead, 5, 40, 5);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  taken.push_back(TakeValid());
  taken.push_back(TakeValid());

  EXPECT_EQ(device_->PublishResponses(), PushResult::kNothing);
  device_->PutResponse(taken[0], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  // The frontend has not done its final check: event-idx would suppress.
  device_->PutResponse(taken[1], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(taken[2], 0);
  device_->PutResponse(taken[3], -EIO);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNothing);
  EXPECT_EQ(Consume().size(), 4u);
  // With the frontend's final check done, still kNotify.
  EXPECT_FALSE(driver_->FinalCheckForResponses());
  device_->PutResponse(taken[4], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(taken[5], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(Consume().size(), 2u);
  EXPECT_EQ(driver_->FreeSlots(), kSlots);
}

TEST_F(BlkifRingTest, AlwaysModeNeverSuppressesOverManyCycles) {
  MakeRings(NotifyMode::kAlways, NotifyMode::kAlways);
  uint64_t next_id = 0;
  for (int cycle = 0; cycle < 2000; ++cycle) {
    const uint32_t batch = 1 + static_cast<uint32_t>(cycle) % 5;
    const bool final_checks = cycle % 3 == 0;
    std::vector<DeviceRequest> taken;
    for (uint32_t b = 0; b < batch; ++b, ++next_id) {
      WritePageRequest(BlockOp::kRead, next_id, 0,
                       static_cast<uint32_t>(next_id % kDataPages));
      // One push per request: event-idx would suppress all but the first.
      ASSERT_EQ(driver_->Publish(), PushResult::kNotify) << "cycle " << cycle;
    }
    for (uint32_t b = 0; b < batch; ++b) taken.push_back(TakeValid());
    if (final_checks) {
      ASSERT_FALSE(device_->FinalCheckForRequests());
    }
    for (const DeviceRequest& request : taken) {
      device_->PutResponse(request, 0);
      ASSERT_EQ(device_->PublishResponses(), PushResult::kNotify)
          << "cycle " << cycle;
    }
    ASSERT_EQ(Consume().size(), batch);
    if (final_checks) {
      ASSERT_FALSE(driver_->FinalCheckForResponses());
    }
  }
}

// The two sides choose their mode independently.
TEST_F(BlkifRingTest, NotifyModeIsPerSide) {
  MakeRings(NotifyMode::kAlways, NotifyMode::kEventIdx);
  for (uint32_t i = 0; i < 3; ++i) {
    WritePageRequest(BlockOp::kRead, i, 0, i);
    EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  }
  std::vector<DeviceRequest> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(TakeValid());
  device_->PutResponse(taken[0], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(taken[1], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);

  MakeRings(NotifyMode::kEventIdx, NotifyMode::kAlways);
  WritePageRequest(BlockOp::kRead, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  WritePageRequest(BlockOp::kRead, 1, 0, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  DeviceRequest a = TakeValid();
  DeviceRequest b = TakeValid();
  device_->PutResponse(a, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(b, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
}

}  // namespace
}  // namespace pvdisk::transport
