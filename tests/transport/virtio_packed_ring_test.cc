// The packed virtqueue's driver and device rings talking through a real
// shared region, laid out as transport::Queue lays it out (the ring at
// offset 0, then a data pool, then each request id's table pages): the
// entries a chain takes, direct and indirect chains, round trips over many
// laps of both wrap counters with completions in any order, and the exact
// kick and interrupt decisions of both notification modes.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "stats/counters.h"
#include "stats/queue_stats.h"
#include "transport/grant_mapper.h"
#include "transport/protocol.h"
#include "transport/virtio/format.h"
#include "transport/virtio_packed/driver_ring.h"
#include "transport/virtio_packed/format.h"
#include "transport/virtio_packed/protocol.h"
#include "transport/virtio_packed/ring_view.h"
#include "virtio_memory.h"

namespace pvdisk::transport {
namespace {

namespace vp = virtio_packed;
using testing::SegmentTuple;
using testing::Tuples;

constexpr uint32_t kSize = 32;
constexpr uint32_t kMaxSegments = 64;
constexpr uint32_t kPoolPages = 64;
constexpr uint32_t kTablePages = virtio::TablePagesPerRequest(kMaxSegments);
constexpr uint32_t kDataPages = kPoolPages + kSize * kTablePages;
constexpr uint64_t kDiskSectors = uint64_t{1} << 20;

using Responses = std::vector<std::pair<uint64_t, int>>;

class PackedRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    MakeRings(NotifyMode::kEventIdx);
  }
  void TearDown() override {
    device_.reset();
    driver_.reset();
  }

  void MakeRings(NotifyMode mode) {
    device_.reset();
    driver_.reset();
    driver_ = VirtioPackedProtocol().NewDriverRing(memory_.front_ring(), kSize,
                                                   memory_.front_data(), mode);
    DeviceLimits limits;
    limits.disk_sectors = kDiskSectors;
    limits.data_pages = kDataPages;
    limits.max_segments = kMaxSegments;
    limits.serial = "packed";
    device_ = VirtioPackedProtocol().NewDeviceRing(memory_.back_ring(), kSize,
                                                   &grants_, limits, mode);
  }

  static uint32_t TablePage(uint64_t id) {
    return kPoolPages + static_cast<uint32_t>(id) * kTablePages;
  }
  static uint64_t StatusOffset(uint64_t id) {
    return uint64_t{TablePage(id)} * vp::kPageSize + virtio::kStatusOffset;
  }
  uint8_t Status(uint64_t id) { return memory_.front_data()[StatusOffset(id)]; }

  // Writes (without publishing) a request of `pages` whole pages from
  // `first_page` on (kRead/kWrite), or of `sectors` (kDiscard,
  // kWriteZeroes), or a flush.
  void WriteRequest(BlockOp op, uint64_t id, uint64_t sector,
                    uint32_t first_page, uint32_t pages, uint64_t sectors = 0) {
    std::vector<uint32_t> table_pages;
    for (uint32_t t = 0; t < kTablePages; ++t) {
      table_pages.push_back(TablePage(id) + t);
    }
    segments_.clear();
    if (op == BlockOp::kRead || op == BlockOp::kWrite) {
      for (uint32_t i = 0; i < pages; ++i) {
        segments_.push_back(DataSegment{first_page + i, 0, 7});
      }
      sectors = uint64_t{pages} * 8;
    }
    RingRequest request;
    request.op = op;
    request.id = id;
    request.sector = sector;
    request.num_sectors = sectors;
    request.segments = segments_.data();
    request.segment_count = static_cast<uint32_t>(segments_.size());
    request.table_pages = table_pages.data();
    request.table_page_count = kTablePages;
    ASSERT_TRUE(driver_->HasRoomFor(op, request.segment_count));
    driver_->Write(request);
  }

  DeviceRequest TakeValid() {
    DeviceRequest request;
    EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
    return request;
  }

  Responses Consume() {
    Responses responses;
    int consumed = driver_->ConsumeResponses(
        [&](uint64_t id, int result) { responses.emplace_back(id, result); });
    EXPECT_EQ(consumed, static_cast<int>(responses.size()));
    return responses;
  }

  // The driver's view of the shared ring.
  vp::Desc Entry(uint32_t entry) { return view_.Copy(entry); }

  testing::RingMemory memory_{kSize, kDataPages,
                              VirtioPackedProtocol().RingBytes(kSize)};
  vp::RingView view_{memory_.front_ring(), kSize};
  std::unique_ptr<GrantMapper> persistent_ =
      NewPersistentGrants(memory_.back_data());
  testing::CheckedGrants grants_{persistent_.get(), kDataPages};
  std::unique_ptr<DriverRing> driver_;
  std::unique_ptr<DeviceRing> device_;
  std::vector<DataSegment> segments_;
};

TEST(VirtioPackedProtocolTest, RegisteredWithItsLayout) {
  auto found = FindProtocol("virtio-packed");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, &VirtioPackedProtocol());
  const Protocol& packed = VirtioPackedProtocol();
  EXPECT_EQ(packed.name(), "virtio-packed");
  EXPECT_EQ(packed.max_ring_size(), 32768u);
  for (uint32_t size = 32; size <= 32768; size *= 2) {
    SCOPED_TRACE(size);
    vp::RingLayout layout = vp::LayoutFor(size);
    EXPECT_EQ(layout.desc, 0u);
    EXPECT_EQ(layout.driver_event, 16u * size);
    EXPECT_EQ(layout.device_event % vp::kPageSize, 0u);
    EXPECT_GT(layout.device_event, layout.driver_event);
    EXPECT_EQ(layout.bytes, layout.device_event + vp::kPageSize);
    EXPECT_EQ(packed.RingBytes(size), layout.bytes);
  }
  EXPECT_EQ(packed.RingBytes(32), 8192u);
  EXPECT_EQ(packed.TablePagesPerRequest(11), virtio::TablePagesPerRequest(11));
  EXPECT_EQ(packed.TablePagesPerRequest(256),
            virtio::TablePagesPerRequest(256));
}

TEST(VirtioPackedFormatTest, PositionsWrapCountersAndOwnerBits) {
  EXPECT_EQ(vp::EntryOf(0, 32), 0u);
  EXPECT_EQ(vp::EntryOf(33, 32), 1u);
  EXPECT_TRUE(vp::WrapOf(0, 32));  // both sides start at 1
  EXPECT_TRUE(vp::WrapOf(31, 32));
  EXPECT_FALSE(vp::WrapOf(32, 32));  // toggled at the ring's end
  EXPECT_TRUE(vp::WrapOf(64, 32));
  // Across the 32-bit counter's own wrap the laps keep alternating.
  EXPECT_FALSE(vp::WrapOf(UINT32_MAX, 32));
  EXPECT_TRUE(vp::WrapOf(UINT32_MAX + 1u, 32));
  EXPECT_EQ(vp::OffWrapOf(5, 32), 0x8005u);
  EXPECT_EQ(vp::OffWrapOf(37, 32), 5u);
  // Available: AVAIL = wrap, USED = !wrap. Used: both = wrap.
  EXPECT_EQ(vp::AvailBits(true), vp::kDescAvail);
  EXPECT_EQ(vp::AvailBits(false), vp::kDescUsed);
  EXPECT_EQ(vp::UsedBits(true), vp::kDescAvail | vp::kDescUsed);
  EXPECT_EQ(vp::UsedBits(false), 0u);
}

TEST(VirtioPackedFormatTest, NeedEventIffTheNamedPositionWasPassed) {
  // Publishing positions [3, 6) in lap 0: events at 3, 4, 5 (wrap 1).
  EXPECT_FALSE(vp::NeedEvent(0x8002, 3, 6, 32));
  EXPECT_TRUE(vp::NeedEvent(0x8003, 3, 6, 32));
  EXPECT_TRUE(vp::NeedEvent(0x8005, 3, 6, 32));
  EXPECT_FALSE(vp::NeedEvent(0x8006, 3, 6, 32));
  // The same offsets with the other wrap counter name lap 1: not passed.
  EXPECT_FALSE(vp::NeedEvent(0x0003, 3, 6, 32));
  EXPECT_FALSE(vp::NeedEvent(0x0005, 3, 6, 32));
  // A batch across the ring's end: [30, 35) is 30, 31 (wrap 1), 0..2
  // (wrap 0).
  EXPECT_TRUE(vp::NeedEvent(0x801e, 30, 35, 32));
  EXPECT_TRUE(vp::NeedEvent(0x801f, 30, 35, 32));
  EXPECT_TRUE(vp::NeedEvent(0x0000, 30, 35, 32));
  EXPECT_TRUE(vp::NeedEvent(0x0002, 30, 35, 32));
  EXPECT_FALSE(vp::NeedEvent(0x0003, 30, 35, 32));
  EXPECT_FALSE(vp::NeedEvent(0x8000, 30, 35, 32));
  EXPECT_FALSE(vp::NeedEvent(0x801d, 30, 35, 32));
  // Across the 32-bit counter's wrap.
  EXPECT_TRUE(vp::NeedEvent(vp::OffWrapOf(UINT32_MAX, 32), UINT32_MAX - 1,
                            UINT32_MAX + 2u, 32));
  EXPECT_TRUE(
      vp::NeedEvent(vp::OffWrapOf(0, 32), UINT32_MAX - 1, UINT32_MAX + 2u, 32));
  EXPECT_FALSE(
      vp::NeedEvent(vp::OffWrapOf(1, 32), UINT32_MAX - 1, UINT32_MAX + 2u, 32));
  // Nothing published: never.
  EXPECT_FALSE(vp::NeedEvent(0x8003, 3, 3, 32));
}

TEST(VirtioPackedFormatTest, ShouldNotifyByTheSuppressionMode) {
  EXPECT_TRUE(vp::ShouldNotify({0, vp::kEventEnable}, true, 3, 4, 32));
  EXPECT_TRUE(vp::ShouldNotify({0, vp::kEventEnable}, false, 3, 4, 32));
  EXPECT_FALSE(vp::ShouldNotify({0, vp::kEventDisable}, true, 3, 4, 32));
  EXPECT_FALSE(vp::ShouldNotify({0, vp::kEventDisable}, false, 3, 4, 32));
  EXPECT_TRUE(vp::ShouldNotify({0x8003, vp::kEventDesc}, true, 3, 4, 32));
  EXPECT_FALSE(vp::ShouldNotify({0x8009, vp::kEventDesc}, true, 3, 4, 32));
  // DESC without the event-index feature is not a mode: notify.
  EXPECT_TRUE(vp::ShouldNotify({0x8009, vp::kEventDesc}, false, 3, 4, 32));
}

TEST_F(PackedRingTest, DriverInitialisesTheQueue) {
  for (NotifyMode mode : {NotifyMode::kAlways, NotifyMode::kEventIdx}) {
    std::memset(memory_.front_ring(), 0xAB, memory_.ring_bytes());
    MakeRings(mode);
    // Everything zero but the event suppressions, which under event-idx
    // name position 0 of lap 0 (as a zeroed split-queue event index does).
    const vp::RingLayout layout = vp::LayoutFor(kSize);
    for (size_t i = 0; i < memory_.ring_bytes(); ++i) {
      if (mode == NotifyMode::kEventIdx &&
          ((i >= layout.driver_event && i < layout.driver_event + 4) ||
           (i >= layout.device_event && i < layout.device_event + 4))) {
        continue;
      }
      ASSERT_EQ(memory_.back_ring()[i], 0) << "ring byte " << i;
    }
    const uint16_t flags =
        mode == NotifyMode::kEventIdx ? vp::kEventDesc : vp::kEventEnable;
    const uint16_t off_wrap = mode == NotifyMode::kEventIdx ? 0x8000 : 0;
    EXPECT_EQ(view_.LoadDriverEvent().flags, flags);
    EXPECT_EQ(view_.LoadDriverEvent().off_wrap, off_wrap);
    EXPECT_EQ(view_.LoadDeviceEvent().flags, flags);
    EXPECT_EQ(view_.LoadDeviceEvent().off_wrap, off_wrap);
  }
  EXPECT_EQ(driver_->FreeSlots(), kSize);
  EXPECT_FALSE(device_->HasRequests());
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kNone);
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNothing);
  EXPECT_EQ(Consume().size(), 0u);
}

TEST_F(PackedRingTest, OnePageReadTakesThreeEntriesHandedOverAtPublish) {
  WriteRequest(BlockOp::kRead, 3, 100, 5, 1);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 3);
  // Everything but the first entry's flags is written; the device sees
  // nothing yet.
  EXPECT_EQ(Entry(0).flags, 0u);
  EXPECT_FALSE(device_->HasRequests());
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);

  const vp::Desc header = Entry(0);
  const vp::Desc data = Entry(1);
  const vp::Desc status = Entry(2);
  EXPECT_EQ(header.flags, vp::kDescAvail | vp::kDescNext);
  EXPECT_EQ(header.addr, uint64_t{TablePage(3)} * vp::kPageSize);
  EXPECT_EQ(header.len, 16u);
  EXPECT_EQ(data.flags, vp::kDescAvail | vp::kDescNext | vp::kDescWrite);
  EXPECT_EQ(data.addr, 5u * vp::kPageSize);
  EXPECT_EQ(data.len, vp::kPageSize);
  EXPECT_EQ(status.flags, vp::kDescAvail | vp::kDescWrite);
  EXPECT_EQ(status.addr, StatusOffset(3));
  EXPECT_EQ(status.len, 1u);
  EXPECT_LT(status.id, kSize);  // the buffer id, in the last entry

  ASSERT_TRUE(device_->HasRequests());
  DeviceRequest request = TakeValid();
  EXPECT_EQ(request.op, BlockOp::kRead);
  EXPECT_EQ(request.wire_op, virtio::kTypeIn);
  EXPECT_EQ(request.sector, 100u);
  EXPECT_EQ(request.num_sectors, 8u);
  EXPECT_FALSE(request.indirect);
  EXPECT_EQ(Tuples(request.segments), (std::vector<SegmentTuple>{{5, 0, 7}}));
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kNone);

  std::memset(memory_.back_data() + 5 * vp::kPageSize, 0x5A, vp::kPageSize);
  device_->PutResponse(request, 0);
  EXPECT_EQ(Entry(0).flags, header.flags);  // not handed back yet
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  // One used entry, over the chain's first: id, bytes written, both bits.
  EXPECT_EQ(Entry(0).flags & vp::kOwnerBits, vp::UsedBits(true));
  EXPECT_EQ(Entry(0).id, status.id);
  EXPECT_EQ(Entry(0).len, vp::kPageSize + 1);
  EXPECT_EQ(Status(3), virtio::kStatusOk);

  EXPECT_EQ(Consume(), (Responses{{3, 0}}));
  EXPECT_EQ(driver_->FreeSlots(), kSize);
  EXPECT_EQ(memory_.front_data()[5 * vp::kPageSize + 7], 0x5A);
  EXPECT_EQ(grants_.outstanding(), 0);
}

TEST_F(PackedRingTest, TwoPagesFitDirectlyThreeGoThroughAnIndirectTable) {
  EXPECT_EQ(PackedDriverRing::kMaxDirectDescriptors, 4u);
  WriteRequest(BlockOp::kWrite, 0, 0, 0, 2);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 4);
  WriteRequest(BlockOp::kWrite, 1, 16, 2, 32);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 5);
  driver_->Publish();
  const vp::Desc pointer = Entry(4);
  EXPECT_EQ(pointer.flags, vp::kDescAvail | vp::kDescIndirect);
  EXPECT_EQ(pointer.len, 34u * sizeof(vp::Desc));
  EXPECT_EQ(pointer.addr, uint64_t{TablePage(1)} * vp::kPageSize +
                              virtio::kIndirectTableOffset);
  DeviceRequest two = TakeValid();
  EXPECT_FALSE(two.indirect);
  EXPECT_EQ(two.num_sectors, 16u);
  DeviceRequest many = TakeValid();
  EXPECT_TRUE(many.indirect);
  EXPECT_EQ(many.sector, 16u);
  EXPECT_EQ(many.num_sectors, 256u);
  ASSERT_EQ(many.segments.size(), 32u);
  EXPECT_EQ(Tuples(&many.segments[31], 1),
            (std::vector<SegmentTuple>{{33, 0, 7}}));
  // Answered in the other order: the used entries go in answer order.
  device_->PutResponse(many, -EIO);
  device_->PutResponse(two, 0);
  device_->PublishResponses();
  EXPECT_EQ(Entry(0).id, pointer.id);
  EXPECT_EQ(Entry(1).id, Entry(3).id);  // after the one entry `many` took
  EXPECT_EQ(Consume(), (Responses{{1, -EIO}, {0, 0}}));
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

TEST_F(PackedRingTest, FlushDiscardWriteZeroesAndGetIdRoundTrip) {
  WriteRequest(BlockOp::kFlush, 0, 0, 0, 0);
  WriteRequest(BlockOp::kDiscard, 1, 64, 0, 0, 128);
  WriteRequest(BlockOp::kWriteZeroes, 2, 512, 0, 0, 8);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 8);
  driver_->Publish();
  DeviceRequest flush = TakeValid();
  EXPECT_EQ(flush.op, BlockOp::kFlush);
  DeviceRequest discard = TakeValid();
  EXPECT_EQ(discard.op, BlockOp::kDiscard);
  EXPECT_EQ(discard.sector, 64u);
  EXPECT_EQ(discard.num_sectors, 128u);
  DeviceRequest zeroes = TakeValid();
  EXPECT_EQ(zeroes.op, BlockOp::kWriteZeroes);
  EXPECT_EQ(zeroes.sector, 512u);
  device_->PutResponse(zeroes, -EOPNOTSUPP);
  device_->PutResponse(flush, 0);
  device_->PutResponse(discard, 0);
  device_->PublishResponses();
  EXPECT_EQ(Consume(), (Responses{{2, -EOPNOTSUPP}, {0, 0}, {1, 0}}));
  EXPECT_EQ(Status(2), virtio::kStatusUnsupp);
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

// Many laps of both wrap counters with a random mix of chain lengths (2, 3,
// 4 entries and 1 indirect), requests kept in flight across laps and
// answered in random order with random results: every response reaches the
// driver once with its result, every request decodes as written, and every
// entry comes back.
TEST_F(PackedRingTest, ManyLapsWithOutOfOrderCompletions) {
  std::mt19937 random(16);
  struct Sent {
    BlockOp op;
    uint64_t sector;
    uint32_t pages;
  };
  std::map<uint64_t, Sent> sent;                          // by request id
  std::map<uint64_t, int> answered;                       // by request id
  std::vector<std::pair<uint64_t, DeviceRequest>> taken;  // request id, req
  std::vector<uint64_t> free_ids;
  for (uint64_t id = 0; id < kSize; ++id) free_ids.push_back(id);
  uint64_t entries_passed = 0;
  uint64_t completions = 0;
  std::vector<uint64_t> device_order;  // request ids in the order taken

  for (int step = 0; step < 4000; ++step) {
    // The driver writes a few requests if they fit, and publishes.
    int writes = static_cast<int>(random() % 4);
    for (int i = 0; i < writes && !free_ids.empty(); ++i) {
      static constexpr BlockOp kOps[] = {BlockOp::kRead, BlockOp::kWrite,
                                         BlockOp::kFlush, BlockOp::kDiscard};
      BlockOp op = kOps[random() % 4];
      uint32_t pages = op == BlockOp::kRead || op == BlockOp::kWrite
                           ? 1 + static_cast<uint32_t>(random() % 5)
                           : 0;
      uint32_t segments = pages;
      if (!driver_->HasRoomFor(op, segments)) break;
      uint64_t id = free_ids.back();
      free_ids.pop_back();
      uint64_t sector = (random() % 1000) * 8;
      uint32_t before = driver_->FreeSlots();
      WriteRequest(op, id, sector, static_cast<uint32_t>(id), pages,
                   op == BlockOp::kDiscard ? 8 : 0);
      entries_passed += before - driver_->FreeSlots();
      sent[id] = Sent{op, sector, pages};
      device_order.push_back(id);
    }
    driver_->Publish();
    // The device takes some of what is there.
    int takes = static_cast<int>(random() % 5);
    for (int i = 0; i < takes; ++i) {
      DeviceRequest request;
      TakeResult result = device_->TakeRequest(&request);
      if (result == TakeResult::kNone) break;
      ASSERT_EQ(result, TakeResult::kValid);
      ASSERT_FALSE(device_order.empty());
      uint64_t id = device_order.front();
      device_order.erase(device_order.begin());
      const Sent& s = sent.at(id);
      ASSERT_EQ(request.op, s.op) << "step " << step;
      if (s.op != BlockOp::kFlush) {
        ASSERT_EQ(request.sector, s.sector);
      }
      ASSERT_EQ(request.segments.size(), s.pages);
      ASSERT_EQ(request.indirect, s.pages > 2);
      taken.emplace_back(id, std::move(request));
    }
    // It answers a random subset, in random order.
    std::shuffle(taken.begin(), taken.end(), random);
    size_t answers = taken.empty() ? 0 : random() % (taken.size() + 1);
    for (size_t i = 0; i < answers; ++i) {
      int result = random() % 3 == 0 ? -EIO : 0;
      device_->PutResponse(taken.back().second, result);
      answered[taken.back().first] = result;
      taken.pop_back();
    }
    device_->PublishResponses();
    // The driver consumes what was handed back.
    for (const auto& [id, result] : Consume()) {
      ASSERT_TRUE(answered.count(id)) << "response for unanswered id " << id;
      EXPECT_EQ(result, answered[id]);
      answered.erase(id);
      sent.erase(id);
      free_ids.push_back(id);
      ++completions;
    }
  }
  // Drain.
  driver_->Publish();
  DeviceRequest request;
  while (device_->TakeRequest(&request) == TakeResult::kValid) {
    device_->PutResponse(request, 0);
  }
  for (auto& [id, req] : taken) device_->PutResponse(req, 0);
  device_->PublishResponses();
  completions += Consume().size();
  EXPECT_EQ(driver_->FreeSlots(), kSize);
  EXPECT_EQ(free_ids.size() + sent.size() - answered.size(), kSize);
  // Both wrap counters went round many times.
  EXPECT_GT(entries_passed, 100u * kSize);
  EXPECT_GT(completions, 1000u);
  EXPECT_EQ(grants_.outstanding(), 0);
}

// Event index, kicks: the first publish passes position 0, which the ring
// starts with; a busy device that never re-arms gets no more kicks; once it
// has gone idle and named its next position, exactly the publish that
// passes it kicks, across laps.
TEST_F(PackedRingTest, EventIdxKicksExactlyWhenTheNamedPositionIsPassed) {
  WriteRequest(BlockOp::kFlush, 0, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  WriteRequest(BlockOp::kFlush, 3, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  for (int lap = 0; lap < 3 * static_cast<int>(kSize); ++lap) {
    SCOPED_TRACE(lap);
    // The device drains, answers and goes idle: it asks for a kick at its
    // next position.
    DeviceRequest request;
    while (device_->TakeRequest(&request) == TakeResult::kValid) {
      device_->PutResponse(request, 0);
    }
    EXPECT_FALSE(device_->FinalCheckForRequests());
    device_->PublishResponses();
    Consume();
    // The next publish passes it; one more before the device looks again
    // does not.
    WriteRequest(BlockOp::kRead, 1, 0, 0, 1);  // 3 entries
    EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
    WriteRequest(BlockOp::kFlush, 2, 0, 0, 0);  // 2 entries
    EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
    EXPECT_EQ(driver_->Publish(), PushResult::kNothing);
  }
}

TEST_F(PackedRingTest, EventIdxFinalCheckFindsARequestThatSlippedIn) {
  EXPECT_FALSE(device_->FinalCheckForRequests());
  WriteRequest(BlockOp::kFlush, 0, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  // A request published before the device arms is found by the re-check.
  EXPECT_TRUE(device_->FinalCheckForRequests());
  TakeValid();
}

// Event index, interrupts: the driver names its next used position when it
// goes idle; the publish of responses that passes it interrupts, later ones
// do not until the driver re-arms.
TEST_F(PackedRingTest, EventIdxInterruptsExactlyWhenTheDriverAsked) {
  for (uint64_t id = 0; id < 4; ++id)
    WriteRequest(BlockOp::kFlush, id, 0, 0, 0);
  driver_->Publish();
  std::vector<DeviceRequest> requests(4);
  for (DeviceRequest& r : requests) r = TakeValid();
  EXPECT_FALSE(driver_->FinalCheckForResponses());  // names used position 0
  device_->PutResponse(requests[2], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(requests[0], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);
  EXPECT_EQ(Consume(), (Responses{{2, 0}, {0, 0}}));
  // Re-armed at used position 4 (two chains of two entries consumed).
  EXPECT_FALSE(driver_->FinalCheckForResponses());
  device_->PutResponse(requests[3], 0);
  device_->PutResponse(requests[1], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  // A response published before the driver re-arms is found by its
  // re-check.
  EXPECT_TRUE(driver_->FinalCheckForResponses());
  EXPECT_EQ(Consume(), (Responses{{3, 0}, {1, 0}}));
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNothing);
}

// --notify always: ENABLE/DISABLE only. The device disables kicks while it
// takes requests and enables them in its final check; the driver does the
// same with interrupts while it consumes.
TEST_F(PackedRingTest, AlwaysModeDisablesWhileBusyAndEnablesWhenIdle) {
  MakeRings(NotifyMode::kAlways);
  WriteRequest(BlockOp::kFlush, 0, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  WriteRequest(BlockOp::kFlush, 1, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);  // every publish
  DeviceRequest a = TakeValid();
  EXPECT_EQ(view_.LoadDeviceEvent().flags, vp::kEventDisable);
  WriteRequest(BlockOp::kFlush, 2, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);  // device busy
  DeviceRequest b = TakeValid();
  DeviceRequest c = TakeValid();
  EXPECT_FALSE(device_->FinalCheckForRequests());
  EXPECT_EQ(view_.LoadDeviceEvent().flags, vp::kEventEnable);
  WriteRequest(BlockOp::kFlush, 3, 0, 0, 0);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  DeviceRequest d = TakeValid();

  // Interrupts: enabled from the start.
  device_->PutResponse(a, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(c, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(Consume(), (Responses{{0, 0}, {2, 0}}));
  EXPECT_EQ(view_.LoadDriverEvent().flags, vp::kEventDisable);
  device_->PutResponse(b, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);
  EXPECT_TRUE(driver_->FinalCheckForResponses());  // b slipped in
  EXPECT_EQ(Consume(), (Responses{{1, 0}}));
  EXPECT_FALSE(driver_->FinalCheckForResponses());
  EXPECT_EQ(view_.LoadDriverEvent().flags, vp::kEventEnable);
  device_->PutResponse(d, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(Consume(), (Responses{{3, 0}}));
}

// A ring filled to the last entry stays consistent: nothing fits, the
// device takes everything, and the entries come back.
TEST_F(PackedRingTest, AFullRingFillsEveryEntry) {
  for (uint64_t id = 0; id < kSize / 2; ++id) {
    WriteRequest(BlockOp::kFlush, id, 0, 0, 0);
  }
  EXPECT_EQ(driver_->FreeSlots(), 0u);
  EXPECT_FALSE(driver_->HasRoomFor(BlockOp::kFlush, 0));
  driver_->Publish();
  std::vector<DeviceRequest> requests;
  DeviceRequest request;
  while (device_->TakeRequest(&request) == TakeResult::kValid) {
    requests.push_back(request);
  }
  EXPECT_EQ(requests.size(), kSize / 2);
  EXPECT_FALSE(device_->HasRequests());
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    device_->PutResponse(*it, 0);
  }
  device_->PublishResponses();
  EXPECT_EQ(Consume().size(), kSize / 2);
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

// The device is a stranger too: a used entry with a buffer id not in flight
// leaves the driver no way to know how far to skip.
TEST_F(PackedRingTest, DriverRefusesAUsedEntryForABufferNotInFlight) {
  WriteRequest(BlockOp::kFlush, 0, 0, 0, 0);
  driver_->Publish();
  vp::Desc forged = Entry(0);
  forged.id = static_cast<uint16_t>(kSize + 3);
  std::memcpy(&view_.At(0), &forged, sizeof(forged));
  view_.StoreFlags(0, vp::UsedBits(true));
  int consumed = driver_->ConsumeResponses([](uint64_t, int) {
    ADD_FAILURE() << "a response for a buffer not in flight";
  });
  EXPECT_EQ(consumed, -EPROTO);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 2);
}

TEST(VirtioPackedPerRequestGrantsTest, RoundTripMapsAndUnmapsEverything) {
  testing::RingMemory memory(kSize, kDataPages,
                             VirtioPackedProtocol().RingBytes(kSize));
  ASSERT_TRUE(memory.ok());
  stats::QueueStats stats;
  auto per_request =
      NewPerRequestGrants(memory.region(), memory.ring_bytes(), &stats);
  testing::CheckedGrants grants(per_request.get(), kDataPages);
  auto driver = VirtioPackedProtocol().NewDriverRing(
      memory.front_ring(), kSize, memory.front_data(), NotifyMode::kEventIdx);
  DeviceLimits limits;
  limits.disk_sectors = kDiskSectors;
  limits.data_pages = kDataPages;
  limits.max_segments = kMaxSegments;
  auto device = VirtioPackedProtocol().NewDeviceRing(
      memory.back_ring(), kSize, &grants, limits, NotifyMode::kEventIdx);
  for (int round = 0; round < 3 * static_cast<int>(kSize); ++round) {
    std::vector<uint32_t> table_pages = {
        kPoolPages + static_cast<uint32_t>(round % 4) * kTablePages};
    DataSegment segment{static_cast<uint32_t>(round % 8), 0, 7};
    RingRequest request;
    request.op = BlockOp::kWrite;
    request.id = static_cast<uint64_t>(round % 4);
    request.sector = 8;
    request.num_sectors = 8;
    request.segments = &segment;
    request.segment_count = 1;
    request.table_pages = table_pages.data();
    request.table_page_count = 1;
    driver->Write(request);
    driver->Publish();
    DeviceRequest taken;
    ASSERT_EQ(device->TakeRequest(&taken), TakeResult::kValid);
    device->PutResponse(taken, 0);
    device->PublishResponses();
    int results = 0;
    driver->ConsumeResponses([&](uint64_t, int result) {
      EXPECT_EQ(result, 0);
      ++results;
    });
    EXPECT_EQ(results, 1);
  }
  EXPECT_EQ(grants.outstanding(), 0);
  stats::QueueSnapshot snapshot = stats.Snapshot();
  EXPECT_GT(snapshot.Get(stats::Counter::grant_maps), 0u);
  EXPECT_EQ(snapshot.Get(stats::Counter::grant_maps),
            snapshot.Get(stats::Counter::grant_unmaps));
}

}  // namespace
}  // namespace pvdisk::transport
