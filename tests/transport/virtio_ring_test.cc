// The virtio driver and device rings talking through a real shared region,
// laid out as transport::Queue lays it out (the ring at offset 0, then a data
// pool, then each request id's table pages): requests and responses round
// trip, descriptors are recycled across the 16-bit index wrap, and the
// event-index and flag rules decide exactly when to kick or interrupt.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "stats/counters.h"
#include "stats/queue_stats.h"
#include "transport/blkif/protocol.h"
#include "transport/grant_mapper.h"
#include "transport/protocol.h"
#include "transport/shared_index.h"
#include "transport/virtio/driver_ring.h"
#include "transport/virtio/format.h"
#include "transport/virtio/protocol.h"
#include "virtio_memory.h"

namespace pvdisk::transport {
namespace {

using testing::SegmentTuple;
using testing::Tuples;

constexpr uint32_t kSize = 32;
constexpr uint32_t kMaxSegments = 64;
constexpr uint32_t kPoolPages = 64;
constexpr uint32_t kTablePages = virtio::TablePagesPerRequest(kMaxSegments);
constexpr uint32_t kDataPages = kPoolPages + kSize * kTablePages;
constexpr uint64_t kDiskSectors = uint64_t{1} << 20;
constexpr char kSerial[] = "pvdisk-serial-0042";

// What the device should decode for one request, and how to answer it.
struct Expected {
  BlockOp op;
  uint64_t id;
  uint64_t sector;
  uint64_t num_sectors;
  std::vector<SegmentTuple> segments;
  bool indirect;
  uint8_t wire_op;
  int answer;  // what the device answers
  int result;  // what the driver then reports
};

class VirtioRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    MakeRings(NotifyMode::kEventIdx);
  }

  void TearDown() override {
    device_.reset();
    driver_.reset();
  }

  DeviceLimits Limits() const {
    DeviceLimits limits;
    limits.disk_sectors = kDiskSectors;
    limits.data_pages = kDataPages;
    limits.max_segments = kMaxSegments;
    limits.serial = kSerial;
    return limits;
  }

  // (Re)initialises the queue with a fresh pair of ends.
  void MakeRings(NotifyMode mode, const DeviceLimits* limits = nullptr) {
    device_.reset();
    driver_.reset();
    driver_ = VirtioProtocol().NewDriverRing(memory_.front_ring(), kSize,
                                             memory_.front_data(), mode);
    device_ =
        VirtioProtocol().NewDeviceRing(memory_.back_ring(), kSize, &grants_,
                                       limits ? *limits : Limits(), mode);
  }

  static uint32_t TablePage(uint64_t id) {
    return kPoolPages + static_cast<uint32_t>(id) * kTablePages;
  }
  static uint64_t StatusOffset(uint64_t id) {
    return uint64_t{TablePage(id)} * virtio::kPageSize + virtio::kStatusOffset;
  }
  uint8_t& Status(uint64_t id) {
    return memory_.front_data()[StatusOffset(id)];
  }
  uint8_t* FrontPage(uint32_t page) {
    return memory_.front_data() + size_t{page} * virtio::kPageSize;
  }
  uint8_t* BackPage(uint32_t page) {
    return memory_.back_data() + size_t{page} * virtio::kPageSize;
  }

  // Writes (without publishing) a request with these segments, as
  // FrontendQueue does: the id's table pages come with it.
  void WriteSegments(BlockOp op, uint64_t id, uint64_t sector,
                     const std::vector<DataSegment>& segments,
                     uint64_t num_sectors = 0) {
    std::vector<uint32_t> table_pages;
    for (uint32_t t = 0; t < kTablePages; ++t) {
      table_pages.push_back(TablePage(id) + t);
    }
    if (op == BlockOp::kRead || op == BlockOp::kWrite) {
      num_sectors = 0;
      for (const DataSegment& s : segments) {
        num_sectors += s.last_sector - s.first_sector + 1u;
      }
    }
    RingRequest request;
    request.op = op;
    request.id = id;
    request.sector = sector;
    request.num_sectors = num_sectors;
    request.segments = segments.data();
    request.segment_count = static_cast<uint32_t>(segments.size());
    request.table_pages = table_pages.data();
    request.table_page_count = kTablePages;
    driver_->Write(request);
  }

  // A read or write of `pages` whole pages from `first_page` on.
  void WritePages(BlockOp op, uint64_t id, uint64_t sector, uint32_t first_page,
                  uint32_t pages) {
    WriteSegments(op, id, sector, PageSegments(first_page, pages));
  }

  static std::vector<DataSegment> PageSegments(uint32_t first_page,
                                               uint32_t pages) {
    std::vector<DataSegment> segments;
    for (uint32_t i = 0; i < pages; ++i) {
      segments.push_back(DataSegment{first_page + i, 0, 7});
    }
    return segments;
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

  // The used entry the device published last.
  virtio::UsedElem LastUsed() {
    return memory_.used_entry(
        static_cast<uint16_t>(LoadAcquire(memory_.used_idx()) - 1));
  }

  testing::VirtioMemory memory_{kSize, kDataPages};
  std::unique_ptr<GrantMapper> persistent_ =
      NewPersistentGrants(memory_.back_data());
  testing::CheckedGrants grants_{persistent_.get(), kDataPages};
  std::unique_ptr<DriverRing> driver_;
  std::unique_ptr<DeviceRing> device_;
};

TEST(VirtioProtocolTest, RegisteredWithItsLayout) {
  auto found = FindProtocol("virtio");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, &VirtioProtocol());
  auto blkif = FindProtocol("blkif");
  ASSERT_TRUE(blkif.ok()) << blkif.status();
  EXPECT_EQ(*blkif, &BlkifProtocol());
  auto unknown = FindProtocol("scsi");
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find(
                "blkif or virtio or virtio-packed or nvme"),
            absl::string_view::npos)
      << unknown.status();
  EXPECT_EQ(ProtocolNames(), (std::vector<std::string_view>{
                                 "blkif", "virtio", "virtio-packed", "nvme"}));

  const Protocol& virtio_protocol = VirtioProtocol();
  EXPECT_EQ(virtio_protocol.name(), "virtio");
  EXPECT_EQ(virtio_protocol.max_ring_size(), 32768u);
  for (uint32_t size = 32; size <= 32768; size *= 2) {
    SCOPED_TRACE(size);
    virtio::RingLayout layout = virtio::LayoutFor(size);
    EXPECT_EQ(virtio_protocol.RingBytes(size), layout.bytes);
    EXPECT_EQ(layout.bytes % 4096, 0u);
    EXPECT_EQ(layout.desc, 0u);
    EXPECT_EQ(layout.avail, 16u * size);
    EXPECT_EQ(layout.used % 4096, 0u);
    EXPECT_GE(layout.used, layout.avail + 6 + 2 * size);
    EXPECT_GE(layout.bytes, layout.used + 6 + 8 * size);
  }
  EXPECT_EQ(virtio_protocol.RingBytes(32), 8192u);
  // Header, status and discard segment in the first 64 bytes, then a table
  // of max_segments + 2 descriptors.
  EXPECT_EQ(virtio_protocol.TablePagesPerRequest(11), 1u);
  EXPECT_EQ(virtio_protocol.TablePagesPerRequest(250), 1u);  // 64 + 252 * 16
  EXPECT_EQ(virtio_protocol.TablePagesPerRequest(251), 2u);
  EXPECT_EQ(virtio_protocol.TablePagesPerRequest(256), 2u);
  EXPECT_EQ(virtio_protocol.TablePagesPerRequest(4096), 17u);
}

TEST_F(VirtioRingTest, DriverInitialisesTheQueue) {
  std::memset(memory_.front_ring(), 0xAB, memory_.ring_bytes());
  MakeRings(NotifyMode::kEventIdx);
  for (size_t i = 0; i < memory_.ring_bytes(); ++i) {
    ASSERT_EQ(memory_.back_ring()[i], 0) << "ring byte " << i;
  }
  EXPECT_EQ(driver_->FreeSlots(), kSize);
  EXPECT_FALSE(device_->HasRequests());
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kNone);
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNothing);
  EXPECT_EQ(Consume().size(), 0u);
}

TEST_F(VirtioRingTest, OnePageReadIsADirectChain) {
  WritePages(BlockOp::kRead, 3, 100, 5, 1);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 3);  // header, data, status
  EXPECT_FALSE(device_->HasRequests());        // not published yet
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  EXPECT_EQ(memory_.avail_idx(), 1u);

  // The chain as the spec lays it out.
  const uint16_t head = memory_.avail_ring(0);
  ASSERT_LT(head, kSize);
  const virtio::Desc header = *memory_.desc(head);
  EXPECT_EQ(header.addr, uint64_t{TablePage(3)} * virtio::kPageSize);
  EXPECT_EQ(header.len, 16u);
  EXPECT_EQ(header.flags, virtio::kDescNext);
  const virtio::Desc data = *memory_.desc(header.next);
  EXPECT_EQ(data.addr, 5u * virtio::kPageSize);
  EXPECT_EQ(data.len, virtio::kPageSize);
  EXPECT_EQ(data.flags, virtio::kDescNext | virtio::kDescWrite);
  const virtio::Desc status = *memory_.desc(data.next);
  EXPECT_EQ(status.addr, StatusOffset(3));
  EXPECT_EQ(status.len, 1u);
  EXPECT_EQ(status.flags, virtio::kDescWrite);
  virtio::BlkHeader blk;
  std::memcpy(&blk, memory_.front_data() + header.addr, sizeof(blk));
  EXPECT_EQ(blk.type, virtio::kTypeIn);
  EXPECT_EQ(blk.sector, 100u);

  ASSERT_TRUE(device_->HasRequests());
  DeviceRequest request = TakeValid();
  EXPECT_EQ(request.id, head);
  EXPECT_EQ(request.op, BlockOp::kRead);
  EXPECT_EQ(request.wire_op, virtio::kTypeIn);
  EXPECT_EQ(request.sector, 100u);
  EXPECT_EQ(request.num_sectors, 8u);
  EXPECT_FALSE(request.indirect);
  EXPECT_EQ(Tuples(request.segments), (std::vector<SegmentTuple>{{5, 0, 7}}));
  EXPECT_EQ(request.reply_offset, StatusOffset(3));
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kNone);

  // The device "reads" into the page and answers.
  std::memset(BackPage(5), 0x5A, virtio::kPageSize);
  device_->PutResponse(request, 0);
  EXPECT_EQ(LoadAcquire(memory_.used_idx()), 0u);  // not published yet
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(memory_.used_idx(), 1u);
  EXPECT_EQ(LastUsed().id, head);
  EXPECT_EQ(LastUsed().len, virtio::kPageSize + 1);  // data + status byte
  EXPECT_EQ(Status(3), virtio::kStatusOk);

  EXPECT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{{3, 0}}));
  EXPECT_EQ(driver_->FreeSlots(), kSize);
  EXPECT_EQ(FrontPage(5)[0], 0x5A);
  EXPECT_EQ(FrontPage(5)[virtio::kPageSize - 1], 0x5A);
  EXPECT_EQ(grants_.outstanding(), 0);
}

TEST_F(VirtioRingTest, ThirtyTwoPageWriteGoesThroughAnIndirectTable) {
  WritePages(BlockOp::kWrite, 7, 4096, 10, 32);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  const uint16_t head = memory_.avail_ring(0);
  const virtio::Desc pointer = *memory_.desc(head);
  EXPECT_EQ(pointer.flags, virtio::kDescIndirect);
  EXPECT_EQ(pointer.len, 34u * sizeof(virtio::Desc));
  EXPECT_EQ(pointer.addr, uint64_t{TablePage(7)} * virtio::kPageSize +
                              virtio::kIndirectTableOffset);

  DeviceRequest request = TakeValid();
  EXPECT_EQ(request.id, head);
  EXPECT_EQ(request.op, BlockOp::kWrite);
  EXPECT_EQ(request.wire_op, virtio::kTypeOut);
  EXPECT_TRUE(request.indirect);
  EXPECT_EQ(request.sector, 4096u);
  EXPECT_EQ(request.num_sectors, 256u);
  EXPECT_EQ(Tuples(request.segments), Tuples(PageSegments(10, 32)));

  device_->PutResponse(request, 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(LastUsed().id, head);
  EXPECT_EQ(LastUsed().len, 1u);  // a write: only the status byte
  EXPECT_EQ(Status(7), virtio::kStatusOk);
  EXPECT_EQ(Consume(), (std::vector<std::pair<uint64_t, int>>{{7, 0}}));
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

TEST_F(VirtioRingTest, TwoPagesFitDirectlyThreeGoIndirect) {
  EXPECT_EQ(VirtioDriverRing::kMaxDirectDescriptors, 4u);
  WritePages(BlockOp::kRead, 0, 0, 0, 2);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 4);
  WritePages(BlockOp::kRead, 1, 16, 2, 3);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 5);
  driver_->Publish();
  DeviceRequest two = TakeValid();
  EXPECT_FALSE(two.indirect);
  EXPECT_EQ(two.num_sectors, 16u);
  EXPECT_EQ(Tuples(two.segments), Tuples(PageSegments(0, 2)));
  DeviceRequest three = TakeValid();
  EXPECT_TRUE(three.indirect);
  EXPECT_EQ(three.sector, 16u);
  EXPECT_EQ(three.num_sectors, 24u);
  EXPECT_EQ(Tuples(three.segments), Tuples(PageSegments(2, 3)));
  device_->PutResponse(two, 0);
  device_->PutResponse(three, 0);
  device_->PublishResponses();
  EXPECT_EQ(LastUsed().len, 3u * virtio::kPageSize + 1);
  EXPECT_EQ(Consume().size(), 2u);
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

TEST_F(VirtioRingTest, PartialPagesKeepTheirSectors) {
  const std::vector<DataSegment> segments = {
      {2, 3, 5}, {3, 0, 7}, {9, 0, 0}, {4, 7, 7}};
  WriteSegments(BlockOp::kWrite, 4, 77, segments);
  driver_->Publish();
  DeviceRequest request = TakeValid();
  EXPECT_EQ(request.num_sectors, 3u + 8 + 1 + 1);
  EXPECT_EQ(Tuples(request.segments), Tuples(segments));
  EXPECT_EQ(request.sector, 77u);
}

TEST_F(VirtioRingTest, FlushDiscardAndWriteZeroes) {
  WriteSegments(BlockOp::kFlush, 1, 999, {});
  EXPECT_EQ(driver_->FreeSlots(), kSize - 2);  // header and status
  WriteSegments(BlockOp::kDiscard, 2, 1000, {}, 24);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 5);  // + header, segment, status
  WriteSegments(BlockOp::kWriteZeroes, 3, 5000, {}, 9);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 8);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);

  DeviceRequest flush = TakeValid();
  EXPECT_EQ(flush.op, BlockOp::kFlush);
  EXPECT_EQ(flush.wire_op, virtio::kTypeFlush);
  EXPECT_TRUE(flush.segments.empty());
  EXPECT_FALSE(flush.indirect);
  DeviceRequest discard = TakeValid();
  EXPECT_EQ(discard.op, BlockOp::kDiscard);
  EXPECT_EQ(discard.wire_op, virtio::kTypeDiscard);
  EXPECT_EQ(discard.sector, 1000u);
  EXPECT_EQ(discard.num_sectors, 24u);
  EXPECT_TRUE(discard.segments.empty());
  EXPECT_FALSE(discard.indirect);
  DeviceRequest zeroes = TakeValid();
  EXPECT_EQ(zeroes.op, BlockOp::kWriteZeroes);
  EXPECT_EQ(zeroes.wire_op, virtio::kTypeWriteZeroes);
  EXPECT_EQ(zeroes.sector, 5000u);
  EXPECT_EQ(zeroes.num_sectors, 9u);

  for (const DeviceRequest* r : {&flush, &discard, &zeroes}) {
    device_->PutResponse(*r, 0);
    device_->PublishResponses();
    EXPECT_EQ(LastUsed().id, r->id);
    EXPECT_EQ(LastUsed().len, 1u);
  }
  EXPECT_EQ(Consume(),
            (std::vector<std::pair<uint64_t, int>>{{1, 0}, {2, 0}, {3, 0}}));
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

TEST_F(VirtioRingTest, ResultsReachTheDriverAndTheStatusByte) {
  const int answers[] = {0, -EIO, -EOPNOTSUPP, -EINVAL, -ENOMEM};
  const uint8_t statuses[] = {virtio::kStatusOk, virtio::kStatusIoErr,
                              virtio::kStatusUnsupp, virtio::kStatusIoErr,
                              virtio::kStatusIoErr};
  const int results[] = {0, -EIO, -EOPNOTSUPP, -EIO, -EIO};
  for (uint64_t id = 0; id < 5; ++id) {
    WritePages(BlockOp::kRead, id, id * 8, static_cast<uint32_t>(id), 1);
  }
  driver_->Publish();
  for (uint64_t id = 0; id < 5; ++id) {
    SCOPED_TRACE(id);
    EXPECT_EQ(Status(id), 0xff);  // the driver's "not answered yet"
    DeviceRequest request = TakeValid();
    device_->PutResponse(request, answers[id]);
    device_->PublishResponses();
    EXPECT_EQ(Status(id), statuses[id]);
    // Only a successful read wrote data.
    EXPECT_EQ(LastUsed().len, id == 0 ? virtio::kPageSize + 1 : 1u);
  }
  std::vector<std::pair<uint64_t, int>> expected;
  for (uint64_t id = 0; id < 5; ++id) expected.emplace_back(id, results[id]);
  EXPECT_EQ(Consume(), expected);
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

// Descriptors a request takes, by the chain the driver builds.
uint32_t DescriptorsOf(BlockOp op, uint32_t pages) {
  switch (op) {
    case BlockOp::kFlush:
      return 2;
    case BlockOp::kDiscard:
    case BlockOp::kWriteZeroes:
      return 3;
    default:
      return pages + 2 <= 4 ? pages + 2 : 1;
  }
}

// Rounds of mixed requests, as many as fit, answered in reverse order (some
// with errors), so that chains are freed out of order; every decoded request
// matches what the driver wrote and every descriptor comes back.
TEST_F(VirtioRingTest, ManyMixedRoundsFreeEveryDescriptor) {
  constexpr int kRequests = 5000;
  int written = 0;
  int rounds = 0;
  uint64_t sector = 0;
  while (written < kRequests) {
    ++rounds;
    std::vector<Expected> round;
    for (uint64_t id = 0; id < kSize && written < kRequests; ++id) {
      const int kind = (written * 7 + rounds) % 6;
      Expected e{};
      e.id = id;
      e.sector = sector % (kDiskSectors - 512);
      sector += 13;
      uint32_t pages = 0;
      switch (kind) {
        case 0:
        case 1:
          e.op = BlockOp::kRead;
          pages = kind == 0 ? 1 : 2;
          break;
        case 2:
          e.op = BlockOp::kWrite;
          pages = 1 + written % kMaxSegments;
          break;
        case 3:
          e.op = BlockOp::kFlush;
          break;
        case 4:
          e.op = BlockOp::kDiscard;
          break;
        case 5:
          e.op = BlockOp::kWriteZeroes;
          break;
      }
      const uint32_t needed = DescriptorsOf(e.op, pages);
      if (driver_->FreeSlots() < needed) break;
      if (e.op == BlockOp::kRead || e.op == BlockOp::kWrite) {
        ASSERT_TRUE(driver_->HasRoomFor(e.op, pages));
        const uint32_t first =
            static_cast<uint32_t>(id) % (kPoolPages - pages + 1);
        e.segments = Tuples(PageSegments(first, pages));
        e.num_sectors = uint64_t{pages} * 8;
        e.indirect = pages > 2;
        e.wire_op = e.op == BlockOp::kRead ? virtio::kTypeIn : virtio::kTypeOut;
        WritePages(e.op, id, e.sector, first, pages);
      } else {
        e.num_sectors = e.op == BlockOp::kFlush ? 0 : 1 + written % 100;
        e.wire_op = e.op == BlockOp::kFlush     ? virtio::kTypeFlush
                    : e.op == BlockOp::kDiscard ? virtio::kTypeDiscard
                                                : virtio::kTypeWriteZeroes;
        WriteSegments(e.op, id, e.sector, {}, e.num_sectors);
        if (e.op == BlockOp::kFlush) e.sector = 0;
      }
      e.answer = written % 11 == 0 ? -EIO : written % 13 == 0 ? -EOPNOTSUPP : 0;
      e.result = e.answer;
      round.push_back(std::move(e));
      ++written;
    }
    ASSERT_FALSE(round.empty());
    EXPECT_NE(driver_->Publish(), PushResult::kNothing);

    std::vector<DeviceRequest> taken(round.size());
    for (size_t i = 0; i < round.size(); ++i) {
      const Expected& e = round[i];
      DeviceRequest& r = taken[i];
      ASSERT_EQ(device_->TakeRequest(&r), TakeResult::kValid)
          << "round " << rounds << " request " << i;
      ASSERT_EQ(r.op, e.op);
      ASSERT_EQ(r.wire_op, e.wire_op);
      ASSERT_EQ(r.sector, e.sector);
      ASSERT_EQ(r.num_sectors, e.num_sectors);
      ASSERT_EQ(Tuples(r.segments), e.segments);
      ASSERT_EQ(r.indirect, e.indirect);
    }
    DeviceRequest none;
    ASSERT_EQ(device_->TakeRequest(&none), TakeResult::kNone);
    device_->FinalCheckForRequests();

    std::vector<std::pair<uint64_t, int>> expected;
    for (size_t i = round.size(); i-- > 0;) {
      device_->PutResponse(taken[i], round[i].answer);
      expected.emplace_back(round[i].id, round[i].result);
    }
    EXPECT_NE(device_->PublishResponses(), PushResult::kNothing);
    ASSERT_EQ(Consume(), expected) << "round " << rounds;
    driver_->FinalCheckForResponses();
    ASSERT_EQ(driver_->FreeSlots(), kSize) << "round " << rounds;
  }
  EXPECT_EQ(memory_.avail_idx(), static_cast<uint16_t>(kRequests));
  EXPECT_EQ(memory_.used_idx(), static_cast<uint16_t>(kRequests));
  EXPECT_GT(rounds, kRequests / static_cast<int>(kSize));
  EXPECT_EQ(grants_.outstanding(), 0);
}

// 70000 one-page round trips: avail.idx and used.idx wrap past 65535, and
// every push after a final check still notifies, in both modes.
TEST_F(VirtioRingTest, RoundTripsAcrossTheSixteenBitWrap) {
  constexpr int kRoundTrips = 70000;
  constexpr int kBatch = 10;  // 30 of the 32 descriptors
  for (NotifyMode mode : {NotifyMode::kEventIdx, NotifyMode::kAlways}) {
    SCOPED_TRACE(mode == NotifyMode::kEventIdx ? "event-idx" : "always");
    MakeRings(mode);
    int done = 0;
    uint64_t responses = 0;
    std::vector<DeviceRequest> taken(kBatch);
    while (done < kRoundTrips) {
      for (int i = 0; i < kBatch; ++i) {
        WritePages(i % 2 ? BlockOp::kWrite : BlockOp::kRead,
                   static_cast<uint64_t>(i), static_cast<uint64_t>(done + i),
                   static_cast<uint32_t>(i), 1);
      }
      ASSERT_EQ(driver_->FreeSlots(), kSize - 3 * kBatch);
      ASSERT_EQ(driver_->Publish(), PushResult::kNotify) << done;
      for (int i = 0; i < kBatch; ++i) {
        ASSERT_EQ(device_->TakeRequest(&taken[i]), TakeResult::kValid) << done;
        ASSERT_EQ(taken[i].sector, static_cast<uint64_t>(done + i));
        ASSERT_EQ(taken[i].segments.size(), 1u);
        ASSERT_EQ(taken[i].segments[0].page, static_cast<uint32_t>(i));
      }
      ASSERT_FALSE(device_->FinalCheckForRequests());
      for (int i = 0; i < kBatch; ++i) device_->PutResponse(taken[i], 0);
      ASSERT_EQ(device_->PublishResponses(), PushResult::kNotify) << done;
      int consumed = driver_->ConsumeResponses([&](uint64_t id, int result) {
        EXPECT_EQ(result, 0);
        EXPECT_EQ(id, responses % kBatch);
        ++responses;
      });
      ASSERT_EQ(consumed, kBatch);
      ASSERT_FALSE(driver_->FinalCheckForResponses());
      ASSERT_EQ(driver_->FreeSlots(), kSize);
      done += kBatch;
    }
    EXPECT_EQ(responses, uint64_t{kRoundTrips});
    EXPECT_EQ(memory_.avail_idx(), static_cast<uint16_t>(kRoundTrips));
    EXPECT_EQ(memory_.used_idx(), static_cast<uint16_t>(kRoundTrips));
    if (mode == NotifyMode::kEventIdx) {
      EXPECT_EQ(memory_.avail_event(), static_cast<uint16_t>(kRoundTrips));
      EXPECT_EQ(memory_.used_event(), static_cast<uint16_t>(kRoundTrips));
    }
  }
}

// --- Notifications: event index (VIRTIO_RING_F_EVENT_IDX) ---

TEST_F(VirtioRingTest, EventIdxKicksOnlyWhenTheDeviceAsked) {
  WritePages(BlockOp::kRead, 0, 0, 0, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);  // avail_event 0
  EXPECT_EQ(driver_->Publish(), PushResult::kNothing);
  // The device has not done a final check since: no more kicks.
  WritePages(BlockOp::kRead, 1, 0, 1, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  WritePages(BlockOp::kRead, 2, 0, 2, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  for (int i = 0; i < 3; ++i) TakeValid();
  EXPECT_FALSE(device_->FinalCheckForRequests());
  EXPECT_EQ(memory_.avail_event(), 3u);
  // Now it sleeps: the next push kicks, the ones after it do not.
  WritePages(BlockOp::kRead, 3, 0, 3, 1);
  WritePages(BlockOp::kRead, 4, 0, 4, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);  // 3..4 passed event 3
  WritePages(BlockOp::kRead, 5, 0, 5, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
}

TEST_F(VirtioRingTest, EventIdxFinalCheckFindsARequestThatSlippedIn) {
  WritePages(BlockOp::kRead, 0, 0, 0, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  TakeValid();
  // The driver publishes between the device's last take and its final
  // check: suppressed, so the final check must see it.
  WritePages(BlockOp::kRead, 1, 0, 1, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  EXPECT_TRUE(device_->FinalCheckForRequests());
  EXPECT_TRUE(device_->HasRequests());
  TakeValid();
  EXPECT_FALSE(device_->FinalCheckForRequests());
  EXPECT_FALSE(device_->HasRequests());
  WritePages(BlockOp::kRead, 2, 0, 2, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
}

TEST_F(VirtioRingTest, EventIdxInterruptsOnlyWhenTheDriverAsked) {
  for (uint64_t id = 0; id < 4; ++id) {
    WritePages(BlockOp::kRead, id, 0, static_cast<uint32_t>(id), 1);
  }
  driver_->Publish();
  std::vector<DeviceRequest> taken(4);
  for (auto& r : taken) r = TakeValid();
  device_->PutResponse(taken[0], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);  // used_event 0
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNothing);
  device_->PutResponse(taken[1], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);
  EXPECT_EQ(Consume().size(), 2u);
  // The driver has not asked since: still suppressed.
  device_->PutResponse(taken[2], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);
  // The response slipped in before the driver's final check.
  EXPECT_TRUE(driver_->FinalCheckForResponses());
  EXPECT_EQ(Consume().size(), 1u);
  EXPECT_FALSE(driver_->FinalCheckForResponses());
  EXPECT_EQ(memory_.used_event(), 3u);
  device_->PutResponse(taken[3], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(Consume().size(), 1u);
}

TEST(VirtioNeedEventTest, NotifiesIffTheEventIndexWasPassed) {
  using virtio::NeedEvent;
  // NeedEvent(event, new, old): event in [old, new).
  EXPECT_TRUE(NeedEvent(0, 1, 0));
  EXPECT_FALSE(NeedEvent(1, 1, 0));  // not reached yet
  EXPECT_TRUE(NeedEvent(5, 10, 0));
  EXPECT_TRUE(NeedEvent(9, 10, 0));
  EXPECT_FALSE(NeedEvent(10, 10, 0));
  EXPECT_FALSE(NeedEvent(11, 10, 0));
  EXPECT_TRUE(NeedEvent(3, 4, 3));
  EXPECT_FALSE(NeedEvent(2, 4, 3));  // already passed before this push
  EXPECT_FALSE(NeedEvent(7, 7, 7));  // nothing pushed
  // Across the wrap: old 65534, new 2 pushed 65534, 65535, 0, 1.
  EXPECT_TRUE(NeedEvent(65534, 2, 65534));
  EXPECT_TRUE(NeedEvent(65535, 2, 65534));
  EXPECT_TRUE(NeedEvent(0, 2, 65534));
  EXPECT_TRUE(NeedEvent(1, 2, 65534));
  EXPECT_FALSE(NeedEvent(2, 2, 65534));
  EXPECT_FALSE(NeedEvent(65533, 2, 65534));
  EXPECT_FALSE(NeedEvent(30000, 2, 65534));
  EXPECT_TRUE(NeedEvent(65535, 0, 65535));
  EXPECT_FALSE(NeedEvent(0, 0, 65535));
  // A whole window of 65535 entries: everything but `new` itself.
  EXPECT_TRUE(NeedEvent(40000, 100, 101));
  EXPECT_FALSE(NeedEvent(100, 100, 101));
  static_assert(NeedEvent(0, 1, 0));
  static_assert(!NeedEvent(1, 0, 65535));
}

// --- Notifications: flags (kAlways turns EVENT_IDX off) ---

TEST_F(VirtioRingTest, FlagModeDeviceSaysNoNotifyWhileBusy) {
  MakeRings(NotifyMode::kAlways);
  WritePages(BlockOp::kRead, 0, 0, 0, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  EXPECT_EQ(memory_.used_flags(), 0u);
  DeviceRequest first = TakeValid();
  EXPECT_EQ(memory_.used_flags(), virtio::kUsedNoNotify);
  WritePages(BlockOp::kRead, 1, 0, 1, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  WritePages(BlockOp::kRead, 2, 0, 2, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kSuppressed);
  // The final check finds the suppressed requests (and leaves the flag).
  EXPECT_TRUE(device_->FinalCheckForRequests());
  TakeValid();
  TakeValid();
  EXPECT_EQ(memory_.used_flags(), virtio::kUsedNoNotify);
  EXPECT_FALSE(device_->FinalCheckForRequests());
  EXPECT_EQ(memory_.used_flags(), 0u);
  WritePages(BlockOp::kRead, 3, 0, 3, 1);
  EXPECT_EQ(driver_->Publish(), PushResult::kNotify);
  // Event indices are not used in this mode.
  EXPECT_EQ(memory_.avail_event(), 0u);
}

TEST_F(VirtioRingTest, FlagModeDriverSaysNoInterruptWhileConsuming) {
  MakeRings(NotifyMode::kAlways);
  for (uint64_t id = 0; id < 4; ++id) {
    WritePages(BlockOp::kRead, id, 0, static_cast<uint32_t>(id), 1);
  }
  driver_->Publish();
  std::vector<DeviceRequest> taken(4);
  for (auto& r : taken) r = TakeValid();
  device_->PutResponse(taken[0], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  device_->PutResponse(taken[1], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);  // still asleep
  EXPECT_EQ(memory_.avail_flags(), 0u);
  EXPECT_EQ(Consume().size(), 2u);
  EXPECT_EQ(memory_.avail_flags(), virtio::kAvailNoInterrupt);
  device_->PutResponse(taken[2], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kSuppressed);
  // The final check finds it and leaves the flag set.
  EXPECT_TRUE(driver_->FinalCheckForResponses());
  EXPECT_EQ(Consume().size(), 1u);
  EXPECT_FALSE(driver_->FinalCheckForResponses());
  EXPECT_EQ(memory_.avail_flags(), 0u);
  device_->PutResponse(taken[3], 0);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  EXPECT_EQ(memory_.used_event(), 0u);
  EXPECT_EQ(Consume().size(), 1u);
}

// --- GET_ID, built by hand ---

class VirtioGetIdTest : public VirtioRingTest {
 protected:
  // Pushes header (type 8) -> 20-byte writable buffer -> status, all in
  // table page 0, at descriptors 5, 9, 2, and returns the head.
  uint16_t PushGetId(uint32_t buffer_len = virtio::kIdBytes) {
    const uint64_t base = uint64_t{TablePage(0)} * virtio::kPageSize;
    virtio::BlkHeader header{virtio::kTypeGetId, 0, 0};
    std::memcpy(memory_.front_data() + base, &header, sizeof(header));
    std::memset(memory_.front_data() + base + 256, 0xEE, 64);
    memory_.front_data()[base + 16] = 0xff;
    *memory_.desc(5) = virtio::Desc{base, 16, virtio::kDescNext, 9};
    *memory_.desc(9) = virtio::Desc{base + 256, buffer_len,
                                    virtio::kDescNext | virtio::kDescWrite, 2};
    *memory_.desc(2) = virtio::Desc{base + 16, 1, virtio::kDescWrite, 0};
    memory_.avail_ring(0) = 5;
    StoreRelease(memory_.avail_idx(), uint16_t{1});
    return 5;
  }
  std::string IdBytes() {
    const uint64_t base = uint64_t{TablePage(0)} * virtio::kPageSize;
    return std::string(
        reinterpret_cast<const char*>(memory_.front_data() + base + 256),
        virtio::kIdBytes);
  }
};

TEST_F(VirtioGetIdTest, AnswersWithTheSerialPaddedWithZeros) {
  const uint16_t head = PushGetId();
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kAnswered);
  EXPECT_EQ(request.id, head);
  EXPECT_EQ(request.wire_op, virtio::kTypeGetId);
  EXPECT_EQ(device_->PublishResponses(), PushResult::kNotify);
  std::string expected(kSerial);
  expected.resize(virtio::kIdBytes, '\0');
  EXPECT_EQ(IdBytes(), expected);
  EXPECT_EQ(Status(0), virtio::kStatusOk);
  EXPECT_EQ(memory_.used_idx(), 1u);
  EXPECT_EQ(LastUsed().id, head);
  EXPECT_EQ(LastUsed().len, virtio::kIdBytes + 1);
  // Nothing beyond the 20 bytes was written.
  const uint64_t base = uint64_t{TablePage(0)} * virtio::kPageSize;
  EXPECT_EQ(memory_.front_data()[base + 256 + virtio::kIdBytes], 0xEE);
}

TEST_F(VirtioGetIdTest, LongSerialIsCutAtTwentyBytesAndBufferMayBeLonger) {
  DeviceLimits limits = Limits();
  limits.serial = "0123456789abcdefghijKLMNOP";
  MakeRings(NotifyMode::kEventIdx, &limits);
  PushGetId(/*buffer_len=*/64);
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kAnswered);
  device_->PublishResponses();
  EXPECT_EQ(IdBytes(), "0123456789abcdefghij");
  EXPECT_EQ(LastUsed().len, virtio::kIdBytes + 1);
}

TEST_F(VirtioGetIdTest, ShortOrReadableBufferIsInvalid) {
  PushGetId(/*buffer_len=*/19);
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kInvalid);
  // Readable buffer: header, readable buffer, status.
  memory_.desc(9)->flags = virtio::kDescNext;
  memory_.desc(9)->len = virtio::kIdBytes;
  memory_.avail_ring(1) = 5;
  StoreRelease(memory_.avail_idx(), uint16_t{2});
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kInvalid);
  EXPECT_EQ(IdBytes(), std::string(virtio::kIdBytes, '\xEE'));
}

// --- The driver does not trust the device either ---

TEST_F(VirtioRingTest, DriverIgnoresUsedEntriesForHeadsItDidNotHandOut) {
  WritePages(BlockOp::kRead, 6, 0, 0, 1);
  driver_->Publish();
  DeviceRequest request = TakeValid();
  device_->PutResponse(request, 0);
  device_->PublishResponses();
  // The device then publishes garbage: a head out of range, the same head
  // again, and a head that is free.
  uint16_t used = memory_.used_idx();
  memory_.used_ring((used + 0) % kSize) = virtio::UsedElem{40, 1};
  memory_.used_ring((used + 1) % kSize) =
      virtio::UsedElem{static_cast<uint32_t>(request.id), 1};
  memory_.used_ring((used + 2) % kSize) = virtio::UsedElem{31, 1};
  StoreRelease(memory_.used_idx(), static_cast<uint16_t>(used + 3));
  std::vector<std::pair<uint64_t, int>> seen;
  EXPECT_EQ(driver_->ConsumeResponses([&](uint64_t id, int result) {
    seen.emplace_back(id, result);
  }),
            4);
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, int>>{{6, 0}}));
  EXPECT_EQ(driver_->FreeSlots(), kSize);
}

TEST_F(VirtioRingTest, DriverRefusesAUsedIndexTooFarAhead) {
  WritePages(BlockOp::kRead, 0, 0, 0, 1);
  driver_->Publish();
  StoreRelease(memory_.used_idx(), static_cast<uint16_t>(kSize + 1));
  int calls = 0;
  EXPECT_EQ(driver_->ConsumeResponses([&](uint64_t, int) { ++calls; }),
            -EPROTO);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(driver_->FreeSlots(), kSize - 3);
}

// HasRoomFor(op, segments) must not promise room that Write() then
// overdraws.
// DISCARD and WRITE_ZEROES carry a segment descriptor besides header and
// status, so they take 3 descriptors though they have 0 data segments.
TEST_F(VirtioRingTest, DiscardNeverTakesMoreDescriptorsThanHasRoomForChecked) {
  for (uint64_t id = 0; id < 10; ++id) {
    WritePages(BlockOp::kRead, id, id * 8, static_cast<uint32_t>(id), 1);
  }
  ASSERT_EQ(driver_->FreeSlots(), 2u);
  EXPECT_FALSE(driver_->HasRoomFor(BlockOp::kRead, 1));     // 3 descriptors
  EXPECT_FALSE(driver_->HasRoomFor(BlockOp::kRead, 2));     // 4 descriptors
  EXPECT_TRUE(driver_->HasRoomFor(BlockOp::kRead, 3));      // indirect: 1
  EXPECT_TRUE(driver_->HasRoomFor(BlockOp::kFlush, 0));     // 2 descriptors
  EXPECT_FALSE(driver_->HasRoomFor(BlockOp::kDiscard, 0));  // 3 descriptors
  if (driver_->HasRoomFor(BlockOp::kDiscard, 0)) {
    WriteSegments(BlockOp::kDiscard, 10, 5000, {}, 8);
    EXPECT_LE(driver_->FreeSlots(), kSize)
        << "the discard took a third descriptor that was not free";
  }
  driver_->Publish();
  // Every request still decodes as written.
  for (uint64_t id = 0; id < 10; ++id) {
    DeviceRequest request;
    ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid)
        << "request " << id << "'s chain was overwritten";
    EXPECT_EQ(request.sector, id * 8);
  }
}

// --- Per-request grants: the device maps table pages too, and unmaps all ---

TEST(VirtioPerRequestGrantsTest, RoundTripMapsAndUnmapsEverything) {
  testing::VirtioMemory memory(kSize, kDataPages);
  ASSERT_TRUE(memory.ok());
  stats::QueueStats stats;
  std::unique_ptr<GrantMapper> per_request =
      NewPerRequestGrants(memory.region(), memory.ring_bytes(), &stats);
  testing::CheckedGrants grants(per_request.get(), kDataPages);
  DeviceLimits limits;
  limits.disk_sectors = kDiskSectors;
  limits.data_pages = kDataPages;
  limits.max_segments = kMaxSegments;
  auto driver = VirtioProtocol().NewDriverRing(
      memory.front_ring(), kSize, memory.front_data(), NotifyMode::kEventIdx);
  auto device = VirtioProtocol().NewDeviceRing(
      memory.back_ring(), kSize, &grants, limits, NotifyMode::kEventIdx);
  std::vector<DataSegment> segments;
  for (uint32_t i = 0; i < 40; ++i) segments.push_back({i, 0, 7});
  for (uint64_t id = 0; id < 2; ++id) {
    uint32_t table = kPoolPages + static_cast<uint32_t>(id) * kTablePages;
    RingRequest request;
    request.op = id == 0 ? BlockOp::kWrite : BlockOp::kDiscard;
    request.id = id;
    request.sector = 64;
    request.num_sectors = id == 0 ? 320 : 8;
    request.segments = segments.data();
    request.segment_count = id == 0 ? 40 : 0;
    request.table_pages = &table;
    request.table_page_count = 1;
    driver->Write(request);
  }
  driver->Publish();
  for (int i = 0; i < 2; ++i) {
    DeviceRequest request;
    ASSERT_EQ(device->TakeRequest(&request), TakeResult::kValid);
    EXPECT_EQ(request.indirect, i == 0);
    device->PutResponse(request, 0);
  }
  device->PublishResponses();
  std::vector<std::pair<uint64_t, int>> seen;
  driver->ConsumeResponses(
      [&](uint64_t id, int result) { seen.emplace_back(id, result); });
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, int>>{{0, 0}, {1, 0}}));
  stats::QueueSnapshot snapshot = stats.Snapshot();
  EXPECT_GT(snapshot.Get(stats::Counter::grant_maps), 0u);
  EXPECT_EQ(snapshot.Get(stats::Counter::grant_maps),
            snapshot.Get(stats::Counter::grant_unmaps));
  EXPECT_EQ(grants.outstanding(), 0);
}

}  // namespace
}  // namespace pvdisk::transport
