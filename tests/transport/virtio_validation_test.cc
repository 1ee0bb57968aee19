// VirtioDeviceRing against a hostile driver: descriptors, the available ring
// and avail.idx are written by hand into the shared ring (at the offsets
// virtio::LayoutFor() gives), indirect tables and headers into the data
// area. Every malformed request must be refused without a crash and without
// the device reaching outside the data area (CheckedGrants fails the test if
// it asks for such a page); where its status byte could be found, answering
// it as BackendLoop does (-EINVAL, or -EOPNOTSUPP) must write IOERR (or
// UNSUPP) there, and a used entry must echo the head.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "transport/grant_mapper.h"
#include "transport/shared_index.h"
#include "transport/virtio/device_ring.h"
#include "transport/virtio/format.h"
#include "transport/virtio/protocol.h"
#include "virtio_memory.h"

namespace pvdisk::transport {
namespace {

using testing::SegmentTuple;
using testing::Tuples;
using virtio::Desc;
using virtio::kDescIndirect;
using virtio::kDescNext;
using virtio::kDescWrite;

constexpr uint32_t kSize = 32;
constexpr uint32_t kDataPages = 16;
constexpr uint64_t kDataBytes = uint64_t{kDataPages} * virtio::kPageSize;
constexpr uint32_t kMaxSegments = 11;
constexpr uint64_t kDiskSectors = 1000;
constexpr uint64_t kPage = virtio::kPageSize;
// Data in pages 0..7; header, status and discard segment in page 8;
// indirect tables in pages 9 and 10.
constexpr uint64_t kHeaderAddr = 8 * kPage;
constexpr uint64_t kStatusAddr = 8 * kPage + 16;
constexpr uint64_t kDiscardAddr = 8 * kPage + 32;
constexpr uint64_t kIndirectAddr = 9 * kPage;
constexpr uint64_t kIndirectAddr2 = 10 * kPage;

// Where a refused request's status byte must end up.
enum class StatusByte { kWritten, kUntouched };

class VirtioValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    limits_.disk_sectors = kDiskSectors;
    limits_.data_pages = kDataPages;
    limits_.max_segments = kMaxSegments;
    limits_.serial = "hostile";
    MakeDevice();
  }

  void TearDown() override {
    device_.reset();
    EXPECT_EQ(grants_.refused(), 0)
        << "the device asked for pages outside the data area";
  }

  // A fresh device over a zeroed ring, as a driver would leave it.
  void MakeDevice() {
    device_.reset();
    std::memset(memory_.front_ring(), 0, memory_.ring_bytes());
    avail_ = 0;
    device_ = std::make_unique<VirtioDeviceRing>(
        memory_.back_ring(), kSize, &grants_, limits_, NotifyMode::kEventIdx);
  }

  static Desc D(uint64_t addr, uint32_t len, uint16_t flags = 0,
                uint16_t next = 0) {
    return Desc{addr, len, flags, next};
  }
  static Desc Header() { return D(kHeaderAddr, 16); }
  static Desc Status() { return D(kStatusAddr, 1, kDescWrite); }
  static Desc Data(uint32_t page, bool writable) {
    return D(page * kPage, kPage, writable ? kDescWrite : 0);
  }
  static Desc DiscardSegment() { return D(kDiscardAddr, 16); }
  static Desc Indirect(uint64_t addr, uint32_t entries) {
    return D(addr, entries * 16, kDescIndirect);
  }

  // Writes `descs` into the descriptor table at first, first + 1, ...,
  // linked by NEXT (added to all but the last). Returns the head.
  uint16_t Chain(std::vector<Desc> descs, uint16_t first = 0) {
    for (size_t i = 0; i < descs.size(); ++i) {
      Desc d = descs[i];
      if (i + 1 < descs.size()) {
        d.flags |= kDescNext;
        d.next = static_cast<uint16_t>(first + i + 1);
      }
      *memory_.desc(first + i) = d;
    }
    return first;
  }

  // The same for an indirect table at data offset `addr`: entries 0, 1, ...
  void Table(std::vector<Desc> descs, uint64_t addr = kIndirectAddr) {
    for (size_t i = 0; i < descs.size(); ++i) {
      Desc d = descs[i];
      if (i + 1 < descs.size()) {
        d.flags |= kDescNext;
        d.next = static_cast<uint16_t>(i + 1);
      }
      std::memcpy(memory_.front_data() + addr + i * sizeof(Desc), &d,
                  sizeof(d));
    }
  }
  Desc* TableEntry(uint32_t i, uint64_t addr = kIndirectAddr) {
    return reinterpret_cast<Desc*>(memory_.front_data() + addr) + i;
  }

  void SetHeader(uint32_t type, uint64_t sector = 0) {
    virtio::BlkHeader header{type, 0, sector};
    std::memcpy(memory_.front_data() + kHeaderAddr, &header, sizeof(header));
  }
  void SetDiscard(uint64_t sector, uint32_t sectors, uint32_t flags = 0) {
    virtio::DiscardSegment segment{sector, sectors, flags};
    std::memcpy(memory_.front_data() + kDiscardAddr, &segment, sizeof(segment));
  }
  uint8_t& Byte(uint64_t addr) { return memory_.front_data()[addr]; }

  // Publishes `head` as the next available entry.
  void Push(uint16_t head) {
    memory_.avail_ring(avail_ % kSize) = head;
    ++avail_;
    StoreRelease(memory_.avail_idx(), avail_);
  }

  // Answers `request` as BackendLoop does for `taken` and publishes it;
  // returns the used entry the driver finds.
  virtio::UsedElem Answer(const DeviceRequest& request, TakeResult taken) {
    const uint16_t before = LoadAcquire(memory_.used_idx());
    device_->PutResponse(request, taken == TakeResult::kUnsupported
                                      ? -EOPNOTSUPP
                                  : taken == TakeResult::kValid ? 0
                                                                : -EINVAL);
    EXPECT_NE(device_->PublishResponses(), PushResult::kNothing);
    const uint16_t after = LoadAcquire(memory_.used_idx());
    EXPECT_EQ(after, static_cast<uint16_t>(before + 1));
    return memory_.used_entry(before);
  }

  // Pushes `head`, expects TakeRequest to refuse it as `expected`, answers
  // it and checks the used entry and the status byte at `status_addr`.
  DeviceRequest ExpectRefused(uint16_t head, TakeResult expected,
                              StatusByte status,
                              uint64_t status_addr = kStatusAddr) {
    Byte(kStatusAddr) = 0xff;
    Byte(status_addr) = 0xff;
    Push(head);
    DeviceRequest request;
    EXPECT_EQ(device_->TakeRequest(&request), expected);
    EXPECT_EQ(request.id, head);
    virtio::UsedElem used = Answer(request, expected);
    EXPECT_EQ(used.id, head);
    if (status == StatusByte::kWritten) {
      EXPECT_EQ(used.len, 1u);
      EXPECT_EQ(Byte(status_addr), expected == TakeResult::kUnsupported
                                       ? virtio::kStatusUnsupp
                                       : virtio::kStatusIoErr);
    } else {
      EXPECT_EQ(used.len, 0u);
      EXPECT_EQ(Byte(kStatusAddr), 0xff) << "status written where not found";
      EXPECT_EQ(Byte(status_addr), 0xff) << "status written where not found";
    }
    EXPECT_EQ(grants_.outstanding(), 0);
    return request;
  }

  void ExpectInvalid(uint16_t head, StatusByte status) {
    ExpectRefused(head, TakeResult::kInvalid, status);
  }

  DeviceRequest ExpectValid(uint16_t head) {
    Byte(kStatusAddr) = 0xff;
    Push(head);
    DeviceRequest request;
    EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
    EXPECT_EQ(request.id, head);
    virtio::UsedElem used = Answer(request, TakeResult::kValid);
    EXPECT_EQ(used.id, head);
    EXPECT_EQ(Byte(kStatusAddr), virtio::kStatusOk);
    return request;
  }

  // A well-formed one-page read at `sector`, at descriptors 0..2.
  uint16_t GoodRead(uint64_t sector = 0) {
    SetHeader(virtio::kTypeIn, sector);
    return Chain({Header(), Data(0, true), Status()});
  }

  testing::VirtioMemory memory_{kSize, kDataPages};
  std::unique_ptr<GrantMapper> persistent_ =
      NewPersistentGrants(memory_.back_data());
  testing::CheckedGrants grants_{persistent_.get(), kDataPages};
  DeviceLimits limits_;
  std::unique_ptr<VirtioDeviceRing> device_;
  uint16_t avail_ = 0;
};

// --- Well-formed chains built by hand, for contrast ---

TEST_F(VirtioValidationTest, HandBuiltRequestsAreValid) {
  SetHeader(virtio::kTypeIn, 16);
  DeviceRequest read =
      ExpectValid(Chain({Header(), Data(0, true), Data(3, true), Status()}));
  EXPECT_EQ(read.op, BlockOp::kRead);
  EXPECT_EQ(read.sector, 16u);
  EXPECT_EQ(read.num_sectors, 16u);
  EXPECT_FALSE(read.indirect);
  EXPECT_EQ(Tuples(read.segments),
            (std::vector<SegmentTuple>{{0, 0, 7}, {3, 0, 7}}));
  EXPECT_EQ(memory_.used_entry(0).len, 2 * kPage + 1);

  // One descriptor may cross a page: it is split per page.
  SetHeader(virtio::kTypeOut, 8);
  DeviceRequest write = ExpectValid(
      Chain({Header(), D(2048, 4096), D(5 * kPage + 512, 1024), Status()}, 7));
  EXPECT_EQ(write.op, BlockOp::kWrite);
  EXPECT_EQ(write.num_sectors, 10u);
  EXPECT_EQ(Tuples(write.segments),
            (std::vector<SegmentTuple>{{0, 4, 7}, {1, 0, 3}, {5, 1, 2}}));

  // Descriptors in any order of the table, through an indirect table.
  SetHeader(virtio::kTypeIn, 992);  // ends exactly at the end of the disk
  Table({Header(), Data(7, true), Status()});
  DeviceRequest indirect = ExpectValid(Chain({Indirect(kIndirectAddr, 3)}, 31));
  EXPECT_TRUE(indirect.indirect);
  EXPECT_EQ(indirect.sector, 992u);
  EXPECT_EQ(Tuples(indirect.segments), (std::vector<SegmentTuple>{{7, 0, 7}}));

  // A longer status buffer: the status is its last byte.
  SetHeader(virtio::kTypeFlush);
  Byte(kStatusAddr + 3) = 0xff;
  Push(Chain({Header(), D(kStatusAddr, 4, kDescWrite)}));
  DeviceRequest flush;
  ASSERT_EQ(device_->TakeRequest(&flush), TakeResult::kValid);
  EXPECT_EQ(flush.op, BlockOp::kFlush);
  Answer(flush, TakeResult::kValid);
  EXPECT_EQ(Byte(kStatusAddr + 3), virtio::kStatusOk);
}

// --- Descriptor table and chain structure ---

TEST_F(VirtioValidationTest, HeadIndexBeyondTheQueue) {
  ExpectInvalid(40, StatusByte::kUntouched);
  ExpectInvalid(kSize, StatusByte::kUntouched);
  ExpectInvalid(65535, StatusByte::kUntouched);
  // The queue goes on.
  ExpectValid(GoodRead());
}

TEST_F(VirtioValidationTest, NextIndexBeyondTheQueue) {
  SetHeader(virtio::kTypeIn);
  Chain({Header(), Data(0, true), Status()});
  memory_.desc(1)->next = 40;
  ExpectInvalid(0, StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, DescriptorPointingToItself) {
  SetHeader(virtio::kTypeIn);
  *memory_.desc(4) = D(kHeaderAddr, 16, kDescNext, 4);
  ExpectInvalid(4, StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, TwoDescriptorCycle) {
  SetHeader(virtio::kTypeFlush);
  *memory_.desc(0) = D(kHeaderAddr, 16, kDescNext, 1);
  *memory_.desc(1) = D(kStatusAddr, 1, kDescWrite | kDescNext, 0);
  ExpectInvalid(0, StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, ChainLongerThanTheQueue) {
  // All 32 descriptors, the last leading back to the first: 33 steps.
  limits_.max_segments = 64;
  MakeDevice();
  SetHeader(virtio::kTypeOut);
  std::vector<Desc> descs = {Header()};
  for (int i = 0; i < 30; ++i) descs.push_back(Data(i % 8, false));
  descs.push_back(Status());
  Chain(descs);
  memory_.desc(31)->flags |= kDescNext;
  memory_.desc(31)->next = 0;
  ExpectInvalid(0, StatusByte::kUntouched);
  // Exactly as long as the queue is fine.
  memory_.desc(31)->flags = kDescWrite;
  DeviceRequest request = ExpectValid(0);
  EXPECT_EQ(request.segments.size(), 30u);
}

TEST_F(VirtioValidationTest, LoneHeaderOrLoneStatus) {
  SetHeader(virtio::kTypeFlush);
  ExpectInvalid(Chain({Header()}), StatusByte::kUntouched);
  ExpectInvalid(Chain({Status()}), StatusByte::kUntouched);
}

// --- Indirect tables ---

TEST_F(VirtioValidationTest, IndirectTableOfLengthZero) {
  SetHeader(virtio::kTypeIn);
  Table({Header(), Data(0, true), Status()});
  ExpectInvalid(Chain({D(kIndirectAddr, 0, kDescIndirect)}),
                StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, IndirectTableLengthNotAMultipleOfSixteen) {
  SetHeader(virtio::kTypeIn);
  Table({Header(), Data(0, true), Status()});
  ExpectInvalid(Chain({D(kIndirectAddr, 40, kDescIndirect)}),
                StatusByte::kUntouched);
  ExpectInvalid(Chain({D(kIndirectAddr, 49, kDescIndirect)}),
                StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, IndirectTableLongerThanARequestNeeds) {
  // max_segments + 2 = 13 entries at most.
  SetHeader(virtio::kTypeIn);
  std::vector<Desc> table = {Header()};
  for (uint32_t i = 0; i < kMaxSegments; ++i)
    table.push_back(Data(i % 8, true));
  table.push_back(Status());
  Table(table);
  ExpectInvalid(Chain({Indirect(kIndirectAddr, kMaxSegments + 3)}),
                StatusByte::kUntouched);
  ExpectInvalid(Chain({D(kIndirectAddr, 0xFFFFFFF0u, kDescIndirect)}),
                StatusByte::kUntouched);
  DeviceRequest request =
      ExpectValid(Chain({Indirect(kIndirectAddr, kMaxSegments + 2)}));
  EXPECT_EQ(request.segments.size(), kMaxSegments);
  EXPECT_TRUE(request.indirect);
}

TEST_F(VirtioValidationTest, IndirectTableOutsideTheDataArea) {
  // The last 32 bytes of the area plus 16 beyond it.
  ExpectInvalid(Chain({D(kDataBytes - 32, 48, kDescIndirect)}),
                StatusByte::kUntouched);
  ExpectInvalid(Chain({D(kDataBytes, 48, kDescIndirect)}),
                StatusByte::kUntouched);
  // addr + len wraps around 2^64.
  ExpectInvalid(
      Chain({D(std::numeric_limits<uint64_t>::max() - 15, 48, kDescIndirect)}),
      StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, IndirectWithNext) {
  SetHeader(virtio::kTypeIn);
  Table({Header(), Data(0, true), Status()});
  *memory_.desc(0) = D(kIndirectAddr, 48, kDescIndirect | kDescNext, 1);
  *memory_.desc(1) = Status();
  ExpectInvalid(0, StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, NestedIndirectTable) {
  SetHeader(virtio::kTypeIn);
  Table({Data(0, true), Status()}, kIndirectAddr2);
  Table({Header(), Indirect(kIndirectAddr2, 2)});
  ExpectInvalid(Chain({Indirect(kIndirectAddr, 2)}), StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, IndirectNextOutsideTheTable) {
  SetHeader(virtio::kTypeIn);
  Table({Header(), Data(0, true), Status()});
  TableEntry(1)->next = 3;  // one past the 3-entry table
  ExpectInvalid(Chain({Indirect(kIndirectAddr, 3)}), StatusByte::kUntouched);
  TableEntry(1)->next = 65535;
  ExpectInvalid(Chain({Indirect(kIndirectAddr, 3)}), StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, IndirectTableThatLoops) {
  SetHeader(virtio::kTypeIn);
  Table({Header(), Data(0, true), Status()});
  TableEntry(1)->next = 0;
  ExpectInvalid(Chain({Indirect(kIndirectAddr, 3)}), StatusByte::kUntouched);
  TableEntry(1)->next = 1;
  ExpectInvalid(Chain({Indirect(kIndirectAddr, 3)}), StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, DirectDescriptorsThenAnIndirectTable) {
  // Header and one data page direct, the rest in the table: the data
  // segments of both count against max_segments.
  SetHeader(virtio::kTypeOut, 0);
  std::vector<Desc> table;
  for (uint32_t i = 0; i < kMaxSegments - 1; ++i)
    table.push_back(Data(i % 8, false));
  table.push_back(Status());
  Table(table);
  DeviceRequest request = ExpectValid(
      Chain({Header(), Data(5, false), Indirect(kIndirectAddr, kMaxSegments)}));
  EXPECT_TRUE(request.indirect);
  EXPECT_EQ(request.segments.size(), kMaxSegments);
  EXPECT_EQ(request.segments[0].page, 5u);
  // One more direct data descriptor: 12 segments.
  ExpectRefused(Chain({Header(), Data(5, false), Data(6, false),
                       Indirect(kIndirectAddr, kMaxSegments)}),
                TakeResult::kInvalid, StatusByte::kWritten);
}

// --- Descriptor directions, header and status ---

TEST_F(VirtioValidationTest, ReadableAfterWritable) {
  SetHeader(virtio::kTypeIn);
  // The chain as a whole is malformed: its last descriptor is not trusted to
  // be the status byte.
  ExpectInvalid(Chain({Header(), Data(0, true), Data(1, false), Status()}),
                StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, MissingStatusDescriptor) {
  SetHeader(virtio::kTypeOut);
  ExpectInvalid(Chain({Header(), Data(0, false), Data(1, false)}),
                StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, StatusDescriptorOfLengthZero) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(Chain({Header(), Data(0, true), D(kStatusAddr, 0, kDescWrite)}),
                StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, StatusDescriptorOutsideTheDataArea) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(Chain({Header(), Data(0, true), D(kDataBytes, 1, kDescWrite)}),
                StatusByte::kUntouched);
}

TEST_F(VirtioValidationTest, HeaderShorterThanSixteenBytes) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(Chain({D(kHeaderAddr, 8), Data(0, true), Status()}),
                StatusByte::kWritten);
  ExpectInvalid(Chain({D(kHeaderAddr, 17), Data(0, true), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, HeaderMarkedWritable) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(
      Chain({D(kHeaderAddr, 16, kDescWrite), Data(0, true), Status()}),
      StatusByte::kWritten);
}

// --- Data descriptors ---

TEST_F(VirtioValidationTest, DataLengthNotWholeSectors) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(Chain({Header(), D(0, 1000, kDescWrite), Status()}),
                StatusByte::kWritten);
  ExpectInvalid(Chain({Header(), D(0, 0, kDescWrite), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, DataAddressNotSectorAligned) {
  SetHeader(virtio::kTypeOut);
  ExpectInvalid(Chain({Header(), D(100, 512), Status()}), StatusByte::kWritten);
  ExpectInvalid(Chain({Header(), D(kPage + 511, 512), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, ReadIntoReadableData) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(Chain({Header(), Data(0, false), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, WriteFromWritableData) {
  SetHeader(virtio::kTypeOut);
  ExpectInvalid(Chain({Header(), Data(0, true), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, NoDataDescriptor) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(Chain({Header(), Status()}), StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, MoreDataDescriptorsThanMaxSegments) {
  SetHeader(virtio::kTypeIn);
  std::vector<Desc> descs = {Header()};
  for (uint32_t i = 0; i <= kMaxSegments; ++i)
    descs.push_back(Data(i % 8, true));
  descs.push_back(Status());
  ExpectInvalid(Chain(descs), StatusByte::kWritten);
  // Exactly max_segments is fine.
  descs.erase(descs.begin() + 1);
  EXPECT_EQ(ExpectValid(Chain(descs)).segments.size(), kMaxSegments);
}

TEST_F(VirtioValidationTest, SectorRangePastTheEnd) {
  ExpectValid(GoodRead(kDiskSectors - 8));
  ExpectInvalid(GoodRead(kDiskSectors - 7), StatusByte::kWritten);
  ExpectInvalid(GoodRead(kDiskSectors), StatusByte::kWritten);
  ExpectInvalid(GoodRead(kDiskSectors + 1), StatusByte::kWritten);
  // sector + count would wrap around 2^64.
  ExpectInvalid(GoodRead(std::numeric_limits<uint64_t>::max()),
                StatusByte::kWritten);
  ExpectInvalid(GoodRead(std::numeric_limits<uint64_t>::max() - 7),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, DataDescriptorOutsideTheDataArea) {
  SetHeader(virtio::kTypeIn);
  ExpectInvalid(Chain({Header(), D(kDataBytes, 512, kDescWrite), Status()}),
                StatusByte::kUntouched);
  ExpectInvalid(
      Chain({Header(), D(kDataBytes - 512, 1024, kDescWrite), Status()}),
      StatusByte::kUntouched);
  ExpectInvalid(
      Chain({Header(),
             D(std::numeric_limits<uint64_t>::max() - 511, 1024, kDescWrite),
             Status()}),
      StatusByte::kUntouched);
  ExpectInvalid(Chain({D(kDataBytes - 8, 16), Data(0, true), Status()}),
                StatusByte::kUntouched);
  // The last sector of the area is fine.
  ExpectValid(
      Chain({Header(), D(kDataBytes - 512, 512, kDescWrite), Status()}));
}

TEST_F(VirtioValidationTest, ReadOnlyDeviceRefusesWritesAndDiscards) {
  limits_.read_only = true;
  MakeDevice();
  SetHeader(virtio::kTypeOut);
  ExpectInvalid(Chain({Header(), Data(0, false), Status()}),
                StatusByte::kWritten);
  SetDiscard(0, 8);
  SetHeader(virtio::kTypeDiscard);
  ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
  SetHeader(virtio::kTypeWriteZeroes);
  ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
  // Reads and flushes are fine.
  ExpectValid(GoodRead());
  SetHeader(virtio::kTypeFlush);
  ExpectValid(Chain({Header(), Status()}));
}

// --- Flush, discard, write zeroes ---

TEST_F(VirtioValidationTest, FlushWithData) {
  SetHeader(virtio::kTypeFlush);
  ExpectInvalid(Chain({Header(), Data(0, true), Status()}),
                StatusByte::kWritten);
  ExpectInvalid(Chain({Header(), Data(0, false), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, DiscardWithTwoSegments) {
  SetHeader(virtio::kTypeDiscard);
  SetDiscard(0, 8);
  ExpectInvalid(Chain({Header(), D(kDiscardAddr, 32), Status()}),
                StatusByte::kWritten);
  ExpectInvalid(Chain({Header(), DiscardSegment(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, DiscardSegmentMalformed) {
  SetHeader(virtio::kTypeDiscard);
  SetDiscard(0, 8);
  ExpectInvalid(Chain({Header(), D(kDiscardAddr, 8), Status()}),
                StatusByte::kWritten);
  ExpectInvalid(Chain({Header(), D(kDiscardAddr, 16, kDescWrite), Status()}),
                StatusByte::kWritten);
  ExpectInvalid(Chain({Header(), Status()}), StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, DiscardOfZeroSectors) {
  SetHeader(virtio::kTypeDiscard);
  SetDiscard(0, 0);
  ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
}

TEST_F(VirtioValidationTest, DiscardWithFlags) {
  SetHeader(virtio::kTypeDiscard);
  SetDiscard(0, 8, /*flags=*/1);
  ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
  SetDiscard(0, 8);
  DeviceRequest request =
      ExpectValid(Chain({Header(), DiscardSegment(), Status()}));
  EXPECT_EQ(request.op, BlockOp::kDiscard);
}

TEST_F(VirtioValidationTest, DiscardPastTheEnd) {
  SetHeader(virtio::kTypeDiscard);
  SetDiscard(kDiskSectors - 7, 8);
  ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
  SetDiscard(std::numeric_limits<uint64_t>::max(), 8);
  ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
  SetDiscard(8, std::numeric_limits<uint32_t>::max());
  ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                StatusByte::kWritten);
  SetDiscard(kDiskSectors - 8, 8);
  DeviceRequest request =
      ExpectValid(Chain({Header(), DiscardSegment(), Status()}));
  EXPECT_EQ(request.sector, kDiskSectors - 8);
  EXPECT_EQ(request.num_sectors, 8u);
}

TEST_F(VirtioValidationTest, WriteZeroesWithUnknownFlags) {
  SetHeader(virtio::kTypeWriteZeroes);
  for (uint32_t flags : {2u, 3u, 0x80000000u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(flags);
    SetDiscard(0, 8, flags);
    ExpectInvalid(Chain({Header(), DiscardSegment(), Status()}),
                  StatusByte::kWritten);
  }
  SetDiscard(16, 8, 0);
  DeviceRequest zeroes =
      ExpectValid(Chain({Header(), DiscardSegment(), Status()}));
  EXPECT_EQ(zeroes.op, BlockOp::kWriteZeroes);
  EXPECT_EQ(zeroes.sector, 16u);
  // UNMAP: the device may deallocate, and the range must read as zeros,
  // which is what kDiscard promises.
  SetDiscard(16, 8, virtio::kWriteZeroesUnmap);
  EXPECT_EQ(ExpectValid(Chain({Header(), DiscardSegment(), Status()})).op,
            BlockOp::kDiscard);
}

// --- Types, indices ---

TEST_F(VirtioValidationTest, UnknownTypeIsUnsupported) {
  for (uint32_t type : {99u, 2u, 0x80000000u}) {
    SCOPED_TRACE(type);
    SetHeader(type);
    DeviceRequest request =
        ExpectRefused(Chain({Header(), Data(0, true), Status()}),
                      TakeResult::kUnsupported, StatusByte::kWritten);
    EXPECT_EQ(request.wire_op, static_cast<uint8_t>(type));
  }
  ExpectValid(GoodRead());
}

TEST_F(VirtioValidationTest, AvailIndexTooFarAheadBreaksTheRing) {
  StoreRelease(memory_.avail_idx(), static_cast<uint16_t>(kSize + 1));
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kRingBroken);
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kRingBroken);
  // Moving backwards looks like 65535 entries ahead.
  StoreRelease(memory_.avail_idx(), uint16_t{65535});
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kRingBroken);
  EXPECT_EQ(memory_.used_idx(), 0u);  // nothing was answered
}

TEST_F(VirtioValidationTest, AFullAvailableRingIsNotBroken) {
  // 16 flushes at descriptors 2i -> 2i + 1, each made available twice.
  SetHeader(virtio::kTypeFlush);
  for (uint16_t i = 0; i < kSize; i += 2) Chain({Header(), Status()}, i);
  for (uint16_t i = 0; i < kSize; ++i) memory_.avail_ring(i) = i & ~1u;
  StoreRelease(memory_.avail_idx(), static_cast<uint16_t>(kSize));
  DeviceRequest request;
  for (uint32_t i = 0; i < kSize; ++i) {
    ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid) << i;
    EXPECT_EQ(request.id, i & ~1u);
  }
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kNone);
}

// A DeviceRequest reused for a request whose status cannot be found must not
// keep the previous request's status offset (or segments).
TEST_F(VirtioValidationTest, RefusedRequestDoesNotInheritTheLastOne) {
  Push(GoodRead());
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  ASSERT_EQ(request.segments.size(), 1u);
  Byte(kStatusAddr) = 0xff;
  Push(40);
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kInvalid);
  EXPECT_TRUE(request.segments.empty());
  device_->PutResponse(request, -EINVAL);
  EXPECT_EQ(Byte(kStatusAddr), 0xff);
}

// --- Double fetch: the device reads shared memory once ---

// The driver changes shared memory while the device is still decoding. The
// device maps a page for each copy it makes (the indirect table, then the
// header, then a discard segment), and the hook runs just before each
// mapping: it scribbles over what the device has already copied. What the
// device decodes must be what it copied first.
TEST_F(VirtioValidationTest, ChangesAfterTheirCopyAreNotSeen) {
  SetHeader(virtio::kTypeOut, 40);
  Table({Data(2, false), Data(3, false), Status()});
  const uint16_t head =
      Chain({Header(), Data(1, false), Indirect(kIndirectAddr, 3)});
  auto scribble_on_descriptors = [&] {
    for (uint32_t i = 0; i < 3; ++i) {
      memory_.desc(i)->addr = kDataBytes + 4096;
      memory_.desc(i)->len = 1000;
      memory_.desc(i)->flags = kDescWrite | kDescNext;
      memory_.desc(i)->next = 40;
    }
  };
  int maps = 0;
  grants_.on_map = [&](uint32_t, uint32_t) {
    ++maps;
    scribble_on_descriptors();  // copied before any mapping
    if (maps >= 2) {            // the indirect table was copied by map 1
      for (uint32_t i = 0; i < 3; ++i) {
        TableEntry(i)->addr = std::numeric_limits<uint64_t>::max() - 100;
        TableEntry(i)->len = 7;
        TableEntry(i)->flags = kDescIndirect;
        TableEntry(i)->next = 3;
      }
    }
  };
  Push(head);
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  grants_.on_map = nullptr;
  EXPECT_EQ(maps, 2);  // indirect table, header
  EXPECT_EQ(request.op, BlockOp::kWrite);
  EXPECT_EQ(request.sector, 40u);
  EXPECT_EQ(request.num_sectors, 24u);
  EXPECT_TRUE(request.indirect);
  EXPECT_EQ(Tuples(request.segments),
            (std::vector<SegmentTuple>{{1, 0, 7}, {2, 0, 7}, {3, 0, 7}}));
  EXPECT_EQ(request.reply_offset, kStatusAddr);
}

TEST_F(VirtioValidationTest, HeaderChangedAfterItsCopyIsNotSeen) {
  SetHeader(virtio::kTypeDiscard);
  SetDiscard(8, 16);
  const uint16_t head = Chain({Header(), DiscardSegment(), Status()});
  int maps = 0;
  grants_.on_map = [&](uint32_t, uint32_t) {
    if (++maps == 2) {  // the header was copied; the segment is next
      SetHeader(99, 500);
      memory_.desc(1)->len = 32;
      memory_.desc(1)->flags |= kDescWrite;
    }
  };
  Push(head);
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  grants_.on_map = nullptr;
  EXPECT_EQ(maps, 2);
  EXPECT_EQ(request.op, BlockOp::kDiscard);
  EXPECT_EQ(request.wire_op, virtio::kTypeDiscard);
  EXPECT_EQ(request.sector, 8u);
  EXPECT_EQ(request.num_sectors, 16u);
}

// After TakeRequest the driver rewrites the chain: the request and where
// its status goes stay as decoded.
TEST_F(VirtioValidationTest, ChangesAfterTakeRequestAreNotSeen) {
  const uint16_t head = GoodRead(24);
  Push(head);
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kValid);
  const DeviceRequest copy = request;
  SetHeader(virtio::kTypeOut, 900);
  *memory_.desc(0) = D(kDataBytes, 1000, kDescIndirect | kDescNext, 77);
  *memory_.desc(1) = D(kDataBytes - 1, 4096, kDescWrite | kDescNext, 1);
  *memory_.desc(2) = D(kPage * 5 + 7, 1, kDescWrite);
  Byte(kStatusAddr) = 0xff;
  Byte(kPage * 5 + 7) = 0xAA;
  device_->PutResponse(request, 0);
  device_->PublishResponses();
  EXPECT_EQ(request.op, copy.op);
  EXPECT_EQ(request.sector, 24u);
  EXPECT_EQ(Tuples(request.segments), Tuples(copy.segments));
  EXPECT_EQ(Byte(kStatusAddr), virtio::kStatusOk);
  EXPECT_EQ(Byte(kPage * 5 + 7), 0xAA);
  EXPECT_EQ(memory_.used_entry(0).id, head);
  EXPECT_EQ(memory_.used_entry(0).len, kPage + 1);
}

}  // namespace
}  // namespace pvdisk::transport
