// BlkifDeviceRing's validation: malformed requests are written straight into
// the shared ring, as a hostile or buggy frontend would, and must be refused
// with an error response that echoes the id and operation.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "transport/blkif/device_ring.h"
#include "transport/blkif/driver_ring.h"
#include "transport/blkif/format.h"
#include "transport/grant_mapper.h"
#include "transport/shared_index.h"

namespace pvdisk::transport {
namespace {

constexpr uint32_t kSlots = 32;
constexpr uint32_t kDataPages = 16;
constexpr uint64_t kDiskSectors = 1000;
constexpr uint64_t kBigDisk = uint64_t{1} << 20;
// Indirect tests put data in pages 0..7 and segment lists in pages 8..15.
constexpr uint32_t kFirstTablePage = 8;

class BlkifDeviceRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    grants_ = NewPersistentGrants(memory_.back_data());
    limits_.disk_sectors = kDiskSectors;
    limits_.data_pages = kDataPages;
    MakeDevice();
  }

  // A fresh device end with the current limits, over a freshly initialised
  // (empty) shared ring: the frontend initialises the shared header (event
  // indices 1).
  void MakeDevice() {
    device_.reset();
    BlkifDriverRing init(memory_.front_ring(), kSlots, memory_.front_data(),
                         NotifyMode::kEventIdx);
    req_prod_ = 0;
    device_ = std::make_unique<BlkifDeviceRing>(memory_.back_ring(), kSlots,
                                                grants_.get(), limits_,
                                                NotifyMode::kEventIdx);
  }

  // Publishes `slot` as the next request, as a frontend would.
  void Push(const blkif::Slot& slot) {
    std::memcpy(memory_.slot(req_prod_), &slot, sizeof(slot));
    ++req_prod_;
    StoreRelease(memory_.header()->req_prod, req_prod_);
  }

  static blkif::Slot ReadWrite(uint8_t op, uint64_t id, uint64_t sector,
                               uint8_t nr_segments) {
    blkif::Slot slot;
    std::memset(&slot, 0, sizeof(slot));
    slot.req.operation = op;
    slot.req.id = id;
    slot.req.sector_number = sector;
    slot.req.nr_segments = nr_segments;
    for (int i = 0; i < blkif::kMaxDirectSegments; ++i) {
      slot.req.seg[i] = blkif::Segment{static_cast<uint32_t>(i), 0, 7, 0};
    }
    return slot;
  }

  static blkif::Slot Discard(uint64_t id, uint64_t sector, uint64_t count,
                             uint8_t flag) {
    blkif::Slot slot;
    std::memset(&slot, 0, sizeof(slot));
    slot.discard.operation = blkif::kOpDiscard;
    slot.discard.flag = flag;
    slot.discard.id = id;
    slot.discard.sector_number = sector;
    slot.discard.nr_sectors = count;
    return slot;
  }

  // Segment i: all 8 sectors of data page i % 8.
  static std::vector<blkif::Segment> UniformSegments(uint32_t count) {
    std::vector<blkif::Segment> list;
    for (uint32_t i = 0; i < count; ++i) {
      list.push_back(blkif::Segment{i % kFirstTablePage, 0, 7, 0});
    }
    return list;
  }

  // Writes `list` into the indirect pages `pages`, 512 segments per page,
  // through the frontend's mapping.
  void WriteSegmentList(const std::vector<blkif::Segment>& list,
                        std::initializer_list<uint32_t> pages) {
    size_t done = 0;
    for (uint32_t page : pages) {
      if (done >= list.size()) break;
      size_t count =
          std::min<size_t>(blkif::kSegmentsPerIndirectPage, list.size() - done);
      std::memcpy(memory_.front_data() + size_t{page} * blkif::kPageSize,
                  list.data() + done, count * sizeof(blkif::Segment));
      done += count;
    }
    ASSERT_EQ(done, list.size()) << "not enough indirect pages";
  }

  static blkif::Slot Indirect(uint8_t indirect_op, uint64_t id, uint64_t sector,
                              uint16_t nr_segments,
                              std::initializer_list<uint32_t> pages) {
    blkif::Slot slot;
    std::memset(&slot, 0, sizeof(slot));
    slot.indirect.operation = blkif::kOpIndirect;
    slot.indirect.indirect_op = indirect_op;
    slot.indirect.nr_segments = nr_segments;
    slot.indirect.id = id;
    slot.indirect.sector_number = sector;
    int i = 0;
    for (uint32_t page : pages) slot.indirect.indirect_grefs[i++] = page;
    return slot;
  }

  // Pushes an indirect request, expects it refused as `expected`, answers it
  // as BackendLoop does and checks the response; `op` is the operation the
  // response must carry, if that is defined.
  void ExpectIndirectRefused(const blkif::Slot& slot, TakeResult expected,
                             std::optional<uint8_t> op = std::nullopt) {
    Push(slot);
    DeviceRequest request;
    ASSERT_EQ(device_->TakeRequest(&request), expected);
    EXPECT_EQ(request.id, slot.indirect.id);
    const bool unsupported = expected == TakeResult::kUnsupported;
    blkif::Response response =
        Answer(request, unsupported ? -EOPNOTSUPP : -EINVAL);
    EXPECT_EQ(response.id, slot.indirect.id);
    EXPECT_EQ(response.status,
              unsupported ? blkif::kRspEopnotsupp : blkif::kRspError);
    if (op) {
      EXPECT_EQ(response.operation, *op);
    }
  }

  // Pushes an indirect request that must be valid and answers it.
  DeviceRequest ExpectIndirectValid(const blkif::Slot& slot) {
    Push(slot);
    DeviceRequest request;
    EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
    EXPECT_EQ(request.id, slot.indirect.id);
    EXPECT_TRUE(request.indirect);
    blkif::Response response = Answer(request, 0);
    EXPECT_EQ(response.status, blkif::kRspOkay);
    // blkfront matches the response against the indirect operation.
    EXPECT_EQ(response.operation, slot.indirect.indirect_op);
    return request;
  }

  void EnableIndirect(uint32_t max_segments = 1024) {
    limits_.max_segments = max_segments;
    limits_.disk_sectors = kBigDisk;
    MakeDevice();
  }

  // Answers `request` with `result` and returns the response the frontend
  // finds in the ring.
  blkif::Response Answer(const DeviceRequest& request, int result) {
    device_->PutResponse(request, result);
    EXPECT_NE(device_->PublishResponses(), PushResult::kNothing);
    uint32_t rsp_prod = LoadAcquire(memory_.header()->rsp_prod);
    blkif::Response response;
    std::memcpy(&response, &memory_.slot(rsp_prod - 1)->rsp, sizeof(response));
    return response;
  }

  // Pushes `slot`, expects it refused as `expected`, answers it as
  // BackendLoop does, and checks the response the frontend gets.
  void ExpectRefused(const blkif::Slot& slot, TakeResult expected,
                     int16_t expected_status) {
    Push(slot);
    DeviceRequest request;
    ASSERT_EQ(device_->TakeRequest(&request), expected);
    EXPECT_EQ(request.id, slot.req.id);
    EXPECT_EQ(request.wire_op, slot.req.operation);
    blkif::Response response = Answer(
        request, expected == TakeResult::kUnsupported ? -EOPNOTSUPP : -EINVAL);
    EXPECT_EQ(response.id, slot.req.id);
    EXPECT_EQ(response.operation, slot.req.operation);
    EXPECT_EQ(response.status, expected_status);
  }

  void ExpectInvalid(const blkif::Slot& slot) {
    ExpectRefused(slot, TakeResult::kInvalid, blkif::kRspError);
  }

  DeviceRequest ExpectValid(const blkif::Slot& slot) {
    Push(slot);
    DeviceRequest request;
    EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
    EXPECT_EQ(request.id, slot.req.id);
    blkif::Response response = Answer(request, 0);
    EXPECT_EQ(response.status, blkif::kRspOkay);
    return request;
  }

  testing::RingMemory memory_{kSlots, kDataPages};
  std::unique_ptr<GrantMapper> grants_;
  BlkifDeviceLimits limits_;
  std::unique_ptr<BlkifDeviceRing> device_;
  uint32_t req_prod_ = 0;
};

TEST_F(BlkifDeviceRingTest, UnknownOperationsAreUnsupported) {
  ExpectRefused(ReadWrite(42, 1001, 0, 1), TakeResult::kUnsupported,
                blkif::kRspEopnotsupp);
  ExpectRefused(ReadWrite(blkif::kOpWriteBarrier, 1002, 0, 1),
                TakeResult::kUnsupported, blkif::kRspEopnotsupp);
  ExpectRefused(ReadWrite(blkif::kOpIndirect, 1003, 0, 1),
                TakeResult::kUnsupported, blkif::kRspEopnotsupp);
  ExpectRefused(ReadWrite(255, 1004, 0, 0), TakeResult::kUnsupported,
                blkif::kRspEopnotsupp);
}

TEST_F(BlkifDeviceRingTest, SegmentCountMustBeOneToEleven) {
  ExpectInvalid(ReadWrite(blkif::kOpRead, 1, 0, 0));
  ExpectInvalid(ReadWrite(blkif::kOpWrite, 2, 0, 0));
  ExpectInvalid(ReadWrite(blkif::kOpRead, 3, 0, 12));
  ExpectInvalid(ReadWrite(blkif::kOpRead, 4, 0, 255));
  DeviceRequest request = ExpectValid(ReadWrite(blkif::kOpRead, 5, 0, 11));
  EXPECT_EQ(request.segments.size(), 11u);
  EXPECT_EQ(request.num_sectors, 88u);
  EXPECT_FALSE(request.indirect);
}

TEST_F(BlkifDeviceRingTest, DirectRequestsStayAtElevenWithIndirectEnabled) {
  limits_.max_segments = 1024;
  MakeDevice();
  ExpectInvalid(ReadWrite(blkif::kOpRead, 1, 0, 12));
  ExpectInvalid(ReadWrite(blkif::kOpWrite, 2, 0, 255));
  EXPECT_EQ(ExpectValid(ReadWrite(blkif::kOpRead, 3, 0, 11)).segments.size(),
            11u);
}

TEST_F(BlkifDeviceRingTest, SegmentCountMustRespectNegotiatedLimit) {
  limits_.max_segments = 4;
  MakeDevice();
  ExpectInvalid(ReadWrite(blkif::kOpRead, 1, 0, 5));
  ExpectInvalid(ReadWrite(blkif::kOpWrite, 2, 0, 11));
  DeviceRequest request = ExpectValid(ReadWrite(blkif::kOpRead, 3, 0, 4));
  EXPECT_EQ(request.num_sectors, 32u);
}

TEST_F(BlkifDeviceRingTest, GrantReferenceMustBeADataPage) {
  blkif::Slot slot = ReadWrite(blkif::kOpRead, 1, 0, 3);
  slot.req.seg[2].gref = kDataPages;
  ExpectInvalid(slot);
  slot.req.id = 2;
  slot.req.seg[2].gref = std::numeric_limits<uint32_t>::max();
  ExpectInvalid(slot);
  slot.req.id = 3;
  slot.req.seg[2].gref = kDataPages - 1;
  DeviceRequest request = ExpectValid(slot);
  EXPECT_EQ(testing::Tuples(request.segments),
            (std::vector<testing::SegmentTuple>{
                {0, 0, 7}, {1, 0, 7}, {kDataPages - 1, 0, 7}}));
}

TEST_F(BlkifDeviceRingTest, SectorsInsideThePage) {
  blkif::Slot slot = ReadWrite(blkif::kOpWrite, 1, 0, 1);
  slot.req.seg[0].first_sect = 5;
  slot.req.seg[0].last_sect = 4;
  ExpectInvalid(slot);
  slot.req.id = 2;
  slot.req.seg[0].first_sect = 0;
  slot.req.seg[0].last_sect = 8;
  ExpectInvalid(slot);
  slot.req.id = 3;
  slot.req.seg[0].first_sect = 8;
  slot.req.seg[0].last_sect = 8;
  ExpectInvalid(slot);
  slot.req.id = 4;
  slot.req.seg[0].first_sect = 7;
  slot.req.seg[0].last_sect = 7;
  DeviceRequest request = ExpectValid(slot);
  EXPECT_EQ(request.num_sectors, 1u);
  EXPECT_EQ(testing::Tuples(request.segments),
            (std::vector<testing::SegmentTuple>{{0, 7, 7}}));
}

TEST_F(BlkifDeviceRingTest, RangeMustEndInsideTheDisk) {
  // 8 sectors ending exactly at the end are fine; one more is not.
  ExpectValid(ReadWrite(blkif::kOpRead, 1, kDiskSectors - 8, 1));
  ExpectInvalid(ReadWrite(blkif::kOpRead, 2, kDiskSectors - 7, 1));
  ExpectInvalid(ReadWrite(blkif::kOpWrite, 3, kDiskSectors, 1));
  ExpectInvalid(ReadWrite(blkif::kOpRead, 4, kDiskSectors + 100, 1));
  // sector + count would wrap around 2^64.
  ExpectInvalid(
      ReadWrite(blkif::kOpRead, 5, std::numeric_limits<uint64_t>::max(), 1));
  ExpectInvalid(ReadWrite(blkif::kOpWrite, 6,
                          std::numeric_limits<uint64_t>::max() - 3, 2));
}

TEST_F(BlkifDeviceRingTest, FlushTakesNoSegments) {
  blkif::Slot flush = ReadWrite(blkif::kOpFlushDiskCache, 1, 0, 1);
  ExpectInvalid(flush);
  flush.req.id = 2;
  flush.req.nr_segments = 0;
  flush.req.sector_number = 12345678;  // ignored
  DeviceRequest request = ExpectValid(flush);
  EXPECT_EQ(request.op, BlockOp::kFlush);
  EXPECT_EQ(request.sector, 0u);
  EXPECT_EQ(request.num_sectors, 0u);
  EXPECT_TRUE(request.segments.empty());
}

TEST_F(BlkifDeviceRingTest, DiscardChecks) {
  ExpectInvalid(Discard(1, 0, 0, 0));                 // empty
  ExpectInvalid(Discard(2, kDiskSectors - 1, 2, 0));  // past the end
  ExpectInvalid(Discard(3, kDiskSectors + 1, 1, 0));  // past the end
  ExpectInvalid(Discard(4, 10, std::numeric_limits<uint64_t>::max(), 0));
  ExpectInvalid(Discard(5, std::numeric_limits<uint64_t>::max(), 1, 0));
  ExpectInvalid(Discard(6, 0, 8, 4));  // unknown flag
  ExpectInvalid(Discard(7, 0, 8, 0x80));
  ExpectInvalid(Discard(8, 0, 8, blkif::kDiscardZeroes | 8));

  DeviceRequest whole = ExpectValid(Discard(9, 0, kDiskSectors, 0));
  EXPECT_EQ(whole.op, BlockOp::kDiscard);
  EXPECT_EQ(whole.num_sectors, kDiskSectors);
  DeviceRequest secure =
      ExpectValid(Discard(10, 100, 8, blkif::kDiscardSecure));
  EXPECT_EQ(secure.op, BlockOp::kDiscard);
  EXPECT_EQ(secure.sector, 100u);
  DeviceRequest zeroes =
      ExpectValid(Discard(11, 992, 8, blkif::kDiscardZeroes));
  EXPECT_EQ(zeroes.op, BlockOp::kWriteZeroes);
  EXPECT_EQ(zeroes.wire_op, blkif::kOpDiscard);
  EXPECT_EQ(zeroes.num_sectors, 8u);
  EXPECT_TRUE(zeroes.segments.empty());
}

TEST_F(BlkifDeviceRingTest, ReadOnlyDeviceRefusesWritesAndDiscards) {
  limits_.read_only = true;
  MakeDevice();
  ExpectInvalid(ReadWrite(blkif::kOpWrite, 1, 0, 1));
  ExpectInvalid(Discard(2, 0, 8, 0));
  ExpectInvalid(Discard(3, 0, 8, blkif::kDiscardZeroes));
  EXPECT_EQ(ExpectValid(ReadWrite(blkif::kOpRead, 4, 0, 1)).op, BlockOp::kRead);
  blkif::Slot flush = ReadWrite(blkif::kOpFlushDiskCache, 5, 0, 0);
  EXPECT_EQ(ExpectValid(flush).op, BlockOp::kFlush);
}

// The device ring hands the segments over as validated, in order; joining
// adjacent ones into iovecs is the BackendLoop's business.
TEST_F(BlkifDeviceRingTest, ValidReadKeepsSegmentsInOrder) {
  blkif::Slot slot = ReadWrite(blkif::kOpRead, 77, 40, 6);
  slot.req.seg[0] = {3, 2, 7, 0};   // page 3, sectors 2..7
  slot.req.seg[1] = {4, 0, 7, 0};   // page 4: continues page 3
  slot.req.seg[2] = {5, 0, 1, 0};   // page 5, sectors 0..1: continues
  slot.req.seg[3] = {9, 0, 3, 0};   // page 9: elsewhere
  slot.req.seg[4] = {9, 5, 7, 0};   // a gap at sector 4
  slot.req.seg[5] = {10, 0, 7, 0};  // continues page 9
  DeviceRequest request = ExpectValid(slot);
  EXPECT_EQ(request.op, BlockOp::kRead);
  EXPECT_EQ(request.wire_op, blkif::kOpRead);
  EXPECT_FALSE(request.indirect);
  EXPECT_EQ(request.sector, 40u);
  EXPECT_EQ(request.num_sectors, 6u + 8 + 2 + 4 + 3 + 8);
  EXPECT_EQ(
      testing::Tuples(request.segments),
      (std::vector<testing::SegmentTuple>{
          {3, 2, 7}, {4, 0, 7}, {5, 0, 1}, {9, 0, 3}, {9, 5, 7}, {10, 0, 7}}));
}

TEST_F(BlkifDeviceRingTest, ReusedRequestObjectIsFullyOverwritten) {
  // BackendLoop reuses DeviceRequest objects; nothing may leak from the
  // previous request into the next.
  DeviceRequest request;
  Push(ReadWrite(blkif::kOpRead, 1, 0, 11));
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  ASSERT_EQ(request.segments.size(), 11u);
  Push(Discard(2, 16, 8, 0));
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  EXPECT_EQ(request.op, BlockOp::kDiscard);
  EXPECT_TRUE(request.segments.empty());
  EXPECT_EQ(request.sector, 16u);
  EXPECT_EQ(request.num_sectors, 8u);

  // An indirect request, then a direct one: `indirect` is reset too.
  limits_.max_segments = 1024;
  limits_.disk_sectors = kBigDisk;
  MakeDevice();
  WriteSegmentList(UniformSegments(20), {kFirstTablePage});
  Push(Indirect(blkif::kOpRead, 3, 0, 20, {kFirstTablePage}));
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  EXPECT_TRUE(request.indirect);
  EXPECT_EQ(request.segments.size(), 20u);
  Push(ReadWrite(blkif::kOpWrite, 4, 8, 2));
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  EXPECT_FALSE(request.indirect);
  EXPECT_EQ(request.op, BlockOp::kWrite);
  EXPECT_EQ(request.wire_op, blkif::kOpWrite);
  EXPECT_EQ(request.segments.size(), 2u);
  EXPECT_EQ(request.num_sectors, 16u);
}

TEST_F(BlkifDeviceRingTest, DecodedRequestIsAPrivateCopy) {
  blkif::Slot slot = ReadWrite(blkif::kOpWrite, 5, 64, 2);
  Push(slot);
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  DeviceRequest before = request;

  // The frontend rewrites the slot after the backend fetched it.
  blkif::Slot* shared = memory_.slot(0);
  shared->req.operation = blkif::kOpRead;
  shared->req.id = 99;
  shared->req.sector_number = std::numeric_limits<uint64_t>::max();
  shared->req.nr_segments = 11;
  shared->req.seg[0].gref = 1u << 30;
  shared->req.seg[1].last_sect = 200;

  EXPECT_EQ(request.id, before.id);
  EXPECT_EQ(request.op, BlockOp::kWrite);
  EXPECT_EQ(request.wire_op, blkif::kOpWrite);
  EXPECT_EQ(request.sector, 64u);
  EXPECT_EQ(request.num_sectors, 16u);
  EXPECT_EQ(testing::Tuples(request.segments),
            (std::vector<testing::SegmentTuple>{{0, 0, 7}, {1, 0, 7}}));
  // The response echoes the fetched id and operation, not the rewritten ones.
  blkif::Response response = Answer(request, 0);
  EXPECT_EQ(response.id, 5u);
  EXPECT_EQ(response.operation, blkif::kOpWrite);
}

TEST_F(BlkifDeviceRingTest, ProducerTooFarAheadBreaksTheRing) {
  // 32 outstanding on a 32-slot ring is the most there can be.
  for (int i = 0; i < 32; ++i) Push(ReadWrite(blkif::kOpRead, i, 0, 1));
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  // One more than the ring holds while no response has been written.
  StoreRelease(memory_.header()->req_prod, uint32_t{33});
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kRingBroken);
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kRingBroken);
}

TEST_F(BlkifDeviceRingTest, ProducerMovingBackwardsBreaksTheRing) {
  ExpectValid(ReadWrite(blkif::kOpRead, 1, 0, 1));
  ExpectValid(ReadWrite(blkif::kOpRead, 2, 0, 1));
  StoreRelease(memory_.header()->req_prod, uint32_t{1});
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kRingBroken);
}

TEST_F(BlkifDeviceRingTest, TakesNoMoreThanFreeResponseSlots) {
  for (int i = 0; i < 32; ++i) Push(ReadWrite(blkif::kOpRead, i, 0, 1));
  std::vector<DeviceRequest> taken(32);
  for (auto& request : taken) {
    ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  }
  DeviceRequest extra;
  EXPECT_EQ(device_->TakeRequest(&extra), TakeResult::kNone);
  // Answer one; the frontend may then reuse that slot for a new request.
  device_->PutResponse(taken[0], 0);
  device_->PublishResponses();
  Push(ReadWrite(blkif::kOpRead, 100, 8, 1));
  ASSERT_EQ(device_->TakeRequest(&extra), TakeResult::kValid);
  EXPECT_EQ(extra.id, 100u);
  EXPECT_EQ(device_->TakeRequest(&extra), TakeResult::kNone);
}

// --- Indirect requests (BLKIF_OP_INDIRECT) ---

TEST_F(BlkifDeviceRingTest, IndirectNeedsNegotiatedIndirectSegments) {
  // max_segments 11 (the default): no feature-max-indirect-segments.
  limits_.disk_sectors = kBigDisk;
  MakeDevice();
  WriteSegmentList(UniformSegments(20), {kFirstTablePage});
  ExpectIndirectRefused(Indirect(blkif::kOpRead, 1, 0, 20, {kFirstTablePage}),
                        TakeResult::kUnsupported);
  ExpectIndirectRefused(Indirect(blkif::kOpWrite, 2, 0, 5, {kFirstTablePage}),
                        TakeResult::kUnsupported);
  // The same request is fine once indirect segments are offered.
  EnableIndirect();
  DeviceRequest request = ExpectIndirectValid(
      Indirect(blkif::kOpRead, 3, 0, 20, {kFirstTablePage}));
  EXPECT_EQ(request.segments.size(), 20u);
  EXPECT_EQ(request.num_sectors, 160u);
}

TEST_F(BlkifDeviceRingTest, IndirectSegmentCountChecks) {
  EnableIndirect(1024);
  WriteSegmentList(UniformSegments(1024), {kFirstTablePage, 9});
  ExpectIndirectRefused(Indirect(blkif::kOpRead, 1, 0, 0, {kFirstTablePage}),
                        TakeResult::kInvalid, blkif::kOpRead);
  ExpectIndirectRefused(
      Indirect(blkif::kOpWrite, 2, 0, 1025, {kFirstTablePage, 9, 10}),
      TakeResult::kInvalid, blkif::kOpWrite);
  ExpectIndirectRefused(
      Indirect(blkif::kOpRead, 3, 0, 4096, {8, 9, 10, 11, 12, 13, 14, 15}),
      TakeResult::kInvalid, blkif::kOpRead);
  DeviceRequest most =
      ExpectIndirectValid(Indirect(blkif::kOpRead, 4, 0, 1024, {8, 9}));
  EXPECT_EQ(most.segments.size(), 1024u);
  EXPECT_EQ(most.num_sectors, 8192u);
  // Few segments in an indirect request are allowed too.
  DeviceRequest one =
      ExpectIndirectValid(Indirect(blkif::kOpWrite, 5, 0, 1, {8}));
  EXPECT_EQ(one.segments.size(), 1u);
  EXPECT_EQ(one.op, BlockOp::kWrite);

  // The protocol's maximum: 8 pages of 512.
  EnableIndirect(blkif::kMaxIndirectSegments);
  WriteSegmentList(UniformSegments(4096), {8, 9, 10, 11, 12, 13, 14, 15});
  DeviceRequest full = ExpectIndirectValid(
      Indirect(blkif::kOpRead, 6, 0, 4096, {8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(full.segments.size(), 4096u);
  EXPECT_EQ(full.num_sectors, 4096u * 8);
  ExpectIndirectRefused(
      Indirect(blkif::kOpRead, 7, 0, 4097, {8, 9, 10, 11, 12, 13, 14, 15}),
      TakeResult::kInvalid);
}

TEST_F(BlkifDeviceRingTest, IndirectOperationMustBeReadOrWrite) {
  EnableIndirect();
  WriteSegmentList(UniformSegments(16), {kFirstTablePage});
  uint64_t id = 1;
  for (uint8_t op :
       {blkif::kOpWriteBarrier, blkif::kOpFlushDiskCache, blkif::kOpDiscard,
        blkif::kOpIndirect, uint8_t{4}, uint8_t{42}, uint8_t{255}}) {
    SCOPED_TRACE(static_cast<int>(op));
    ExpectIndirectRefused(Indirect(op, id++, 0, 16, {kFirstTablePage}),
                          TakeResult::kInvalid);
  }
}

TEST_F(BlkifDeviceRingTest, IndirectPagesMustBeDataPages) {
  EnableIndirect();
  WriteSegmentList(UniformSegments(600), {8, 9});
  ExpectIndirectRefused(Indirect(blkif::kOpRead, 1, 0, 100, {kDataPages}),
                        TakeResult::kInvalid, blkif::kOpRead);
  ExpectIndirectRefused(Indirect(blkif::kOpWrite, 2, 0, 100,
                                 {std::numeric_limits<uint32_t>::max()}),
                        TakeResult::kInvalid, blkif::kOpWrite);
  // The second of two pages is checked too.
  ExpectIndirectRefused(Indirect(blkif::kOpRead, 3, 0, 600, {8, kDataPages}),
                        TakeResult::kInvalid, blkif::kOpRead);
  // Pages beyond those nr_segments needs are ignored.
  DeviceRequest request = ExpectIndirectValid(
      Indirect(blkif::kOpRead, 4, 0, 100,
               {8, std::numeric_limits<uint32_t>::max(), kDataPages}));
  EXPECT_EQ(request.segments.size(), 100u);
  EXPECT_EQ(ExpectIndirectValid(Indirect(blkif::kOpRead, 5, 0, 600, {8, 9}))
                .segments.size(),
            600u);
}

TEST_F(BlkifDeviceRingTest, BadSegmentInsideAnIndirectPage) {
  EnableIndirect();
  const std::vector<blkif::Segment> good = UniformSegments(600);
  uint64_t id = 1;
  // A bad segment in the first and in the second indirect page.
  for (size_t index : {size_t{3}, size_t{550}}) {
    struct Case {
      const char* what;
      blkif::Segment segment;
    };
    const Case cases[] = {
        {"gref past the data pages", {kDataPages, 0, 7, 0}},
        {"gref far out", {std::numeric_limits<uint32_t>::max(), 0, 7, 0}},
        {"first_sect > last_sect", {1, 5, 4, 0}},
        {"last_sect 8", {1, 0, 8, 0}},
        {"first_sect 8", {1, 8, 8, 0}},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << c.what << " at " << index);
      std::vector<blkif::Segment> list = good;
      list[index] = c.segment;
      WriteSegmentList(list, {8, 9});
      ExpectIndirectRefused(Indirect(blkif::kOpWrite, id++, 0, 600, {8, 9}),
                            TakeResult::kInvalid, blkif::kOpWrite);
    }
  }
  WriteSegmentList(good, {8, 9});
  EXPECT_EQ(ExpectIndirectValid(Indirect(blkif::kOpWrite, id, 0, 600, {8, 9}))
                .num_sectors,
            4800u);
}

TEST_F(BlkifDeviceRingTest, IndirectRangeMustEndInsideTheDisk) {
  EnableIndirect();
  limits_.disk_sectors = kDiskSectors;
  MakeDevice();
  WriteSegmentList(UniformSegments(100), {kFirstTablePage});  // 800 sectors
  ExpectIndirectValid(
      Indirect(blkif::kOpRead, 1, kDiskSectors - 800, 100, {kFirstTablePage}));
  ExpectIndirectRefused(
      Indirect(blkif::kOpRead, 2, kDiskSectors - 799, 100, {kFirstTablePage}),
      TakeResult::kInvalid, blkif::kOpRead);
  ExpectIndirectRefused(
      Indirect(blkif::kOpWrite, 3, kDiskSectors, 100, {kFirstTablePage}),
      TakeResult::kInvalid, blkif::kOpWrite);
  ExpectIndirectRefused(
      Indirect(blkif::kOpRead, 4, std::numeric_limits<uint64_t>::max() - 10,
               100, {kFirstTablePage}),
      TakeResult::kInvalid, blkif::kOpRead);
}

TEST_F(BlkifDeviceRingTest, IndirectWriteOnReadOnlyDeviceIsInvalid) {
  limits_.read_only = true;
  EnableIndirect();
  WriteSegmentList(UniformSegments(64), {kFirstTablePage});
  ExpectIndirectRefused(Indirect(blkif::kOpWrite, 1, 0, 64, {kFirstTablePage}),
                        TakeResult::kInvalid, blkif::kOpWrite);
  DeviceRequest read = ExpectIndirectValid(
      Indirect(blkif::kOpRead, 2, 0, 64, {kFirstTablePage}));
  EXPECT_EQ(read.op, BlockOp::kRead);
}

TEST_F(BlkifDeviceRingTest, IndirectSegmentsAreDecodedInOrder) {
  EnableIndirect();
  std::vector<blkif::Segment> list;
  uint64_t sectors = 0;
  for (uint32_t i = 0; i < 600; ++i) {
    uint8_t first = static_cast<uint8_t>(i % 3);
    uint8_t last = static_cast<uint8_t>(7 - i % 2);
    list.push_back(blkif::Segment{(i * 5) % kFirstTablePage, first, last, 0});
    sectors += last - first + 1u;
  }
  WriteSegmentList(list, {9, 8});  // any pages, in any order
  DeviceRequest request =
      ExpectIndirectValid(Indirect(blkif::kOpWrite, 42, 4096, 600, {9, 8}));
  EXPECT_EQ(request.op, BlockOp::kWrite);
  EXPECT_EQ(request.wire_op, blkif::kOpWrite);
  EXPECT_EQ(request.sector, 4096u);
  EXPECT_EQ(request.num_sectors, sectors);
  ASSERT_EQ(request.segments.size(), list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    ASSERT_EQ(request.segments[i].page, list[i].gref) << i;
    ASSERT_EQ(request.segments[i].first_sector, list[i].first_sect) << i;
    ASSERT_EQ(request.segments[i].last_sector, list[i].last_sect) << i;
  }
}

// The segment list is copied out of the indirect pages once: a frontend
// rewriting them after the backend took the request changes nothing.
TEST_F(BlkifDeviceRingTest, IndirectSegmentListIsAPrivateCopy) {
  EnableIndirect();
  WriteSegmentList(UniformSegments(600), {8, 9});
  Push(Indirect(blkif::kOpRead, 7, 64, 600, {8, 9}));
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  const std::vector<testing::SegmentTuple> before =
      testing::Tuples(request.segments);
  ASSERT_EQ(before.size(), 600u);

  // Hostile rewrites of both indirect pages and of the slot.
  std::vector<blkif::Segment> evil(
      600, blkif::Segment{std::numeric_limits<uint32_t>::max(), 9, 200, 0});
  WriteSegmentList(evil, {8, 9});
  blkif::Slot* shared = memory_.slot(0);
  shared->indirect.nr_segments = 4000;
  shared->indirect.indirect_grefs[0] = 12345;
  shared->indirect.indirect_op = blkif::kOpWrite;

  EXPECT_EQ(testing::Tuples(request.segments), before);
  EXPECT_EQ(request.op, BlockOp::kRead);
  EXPECT_EQ(request.num_sectors, 4800u);
  EXPECT_EQ(request.sector, 64u);
  blkif::Response response = Answer(request, 0);
  EXPECT_EQ(response.id, 7u);
  EXPECT_EQ(response.operation, blkif::kOpRead);
}

}  // namespace
}  // namespace pvdisk::transport
