// NvmeDeviceRing against a hostile driver: commands, doorbells, PRP lists
// and SGL segments written by hand into shared memory. Every malformed
// command is answered with the status a driver expects (or, for an
// impossible doorbell, the ring is reported broken, which the backend turns
// into EIO for the queue's requests), without a crash, a hang, or the device
// reaching outside the data area (CheckedGrants fails the test if it asks
// for such a page); and the next good command is served.
#include <cstdint>
#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "nvme_memory.h"

namespace pvdisk::transport {
namespace {

using namespace nvme;  // NOLINT: the protocol's names
using testing::NvmeDevice;
using testing::NvmeMemory;

constexpr uint32_t kSize = 32;
constexpr uint32_t kDataPages = 64;
constexpr uint32_t kMaxSegments = 16;
constexpr uint64_t kDiskSectors = 10000;
constexpr uint64_t kPage = 4096;
// Lists and segments go in pages 60..63.
constexpr uint64_t kList = 60 * kPage;

class NvmeValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    std::memset(memory_.front_ring(), 0, memory_.ring_bytes());
    Make(false);
  }
  void Make(bool read_only) {
    DeviceLimits limits;
    limits.disk_sectors = kDiskSectors;
    limits.data_pages = kDataPages;
    limits.max_segments = kMaxSegments;
    limits.read_only = read_only;
    device_.reset();
    device_ = std::make_unique<NvmeDevice>(memory_, limits,
                                           RingConfig(NotifyMode::kEventIdx));
  }
  void TearDown() override {
    EXPECT_EQ(device_->grants.refused(), 0)
        << "the device asked for pages outside the data area";
  }

  static Command Read(uint16_t cid, uint64_t slba, uint32_t blocks) {
    Command c{};
    c.opcode = kOpRead;
    c.command_id = cid;
    c.nsid = kNamespaceId;
    c.cdw10 = static_cast<uint32_t>(slba);
    c.cdw11 = static_cast<uint32_t>(slba >> 32);
    c.cdw12 = blocks - 1;
    c.dptr[0] = 0;
    c.dptr[1] = kPage;
    return c;
  }
  static Command WithSgl(Command c, uint64_t addr, uint32_t length,
                         uint8_t id) {
    c.flags = kPsdtSgl;
    SglDescriptor d{};
    d.addr = addr;
    d.length = length;
    d.id = id;
    std::memcpy(c.dptr, &d, sizeof(d));
    return c;
  }
  void PutSgl(uint64_t addr, uint32_t index, uint64_t to, uint32_t length,
              uint8_t id) {
    SglDescriptor d{};
    d.addr = to;
    d.length = length;
    d.id = id;
    std::memcpy(memory_.front_data() + addr + index * sizeof(d), &d, sizeof(d));
  }
  uint64_t& Prp(uint64_t addr, uint32_t index) {
    return reinterpret_cast<uint64_t*>(memory_.front_data() + addr)[index];
  }

  // Submits `command` and takes it.
  TakeResult Submit(const Command& command, DeviceRequest* out) {
    memory_.sq(tail_) = command;
    ++tail_;
    memory_.bells().sq_tail = tail_ % kSize;
    return device_->ring->TakeRequest(out);
  }
  // Answers `request` as the backend would for `result` and returns the
  // status of its completion, checking its command id and phase.
  uint16_t Answer(const DeviceRequest& request, TakeResult taken) {
    int result = taken == TakeResult::kUnsupported ? -EOPNOTSUPP
                 : taken == TakeResult::kInvalid   ? -EINVAL
                                                   : 0;
    if (taken != TakeResult::kAnswered) {
      device_->ring->PutResponse(request, result);
    }
    device_->ring->PublishResponses();
    const Completion c = memory_.cq(head_);
    EXPECT_EQ(c.status & 1, ((head_ / kSize) & 1) == 0 ? 1 : 0);
    ++head_;
    memory_.bells().cq_head = head_ % kSize;
    return StatusOf(c.status);
  }
  // Submits, answers, and returns the status.
  uint16_t StatusOfCommand(const Command& command,
                           TakeResult expected = TakeResult::kInvalid) {
    DeviceRequest out;
    TakeResult taken = Submit(command, &out);
    EXPECT_EQ(taken, expected);
    return Answer(out, taken);
  }
  // A good command is served after whatever came before.
  void ExpectStillServes() {
    DeviceRequest out;
    ASSERT_EQ(Submit(Read(500, 0, 8), &out), TakeResult::kValid);
    EXPECT_EQ(out.segments.size(), 1u);
    EXPECT_EQ(Answer(out, TakeResult::kValid), kScSuccess);
  }

  NvmeMemory memory_{kSize, kDataPages};
  std::unique_ptr<NvmeDevice> device_;
  uint32_t tail_ = 0;
  uint32_t head_ = 0;
};

TEST_F(NvmeValidationTest, UnknownOpcodeIsInvalidOpcode) {
  Command c = Read(1, 0, 8);
  c.opcode = 0x7F;
  EXPECT_EQ(StatusOfCommand(c, TakeResult::kUnsupported), kScInvalidOpcode);
  ExpectStillServes();
}

TEST_F(NvmeValidationTest, CommandFieldsAreChecked) {
  Command c = Read(1, 0, 8);
  c.nsid = 2;
  EXPECT_EQ(StatusOfCommand(c), kScInvalidNamespace);
  c = Read(1, 0, 8);
  c.flags = 1;  // fused
  EXPECT_EQ(StatusOfCommand(c), kScInvalidField);
  c = Read(1, 0, 8);
  c.cdw12 |= 1u << 30;  // FUA: not offered
  EXPECT_EQ(StatusOfCommand(c), kScInvalidField);
  c = Read(1, 0, 8);
  c.flags = 0x80;  // PSDT 2
  EXPECT_EQ(StatusOfCommand(c), kScInvalidField);
  EXPECT_EQ(StatusOfCommand(Read(1, kDiskSectors - 4, 8)), kScLbaOutOfRange);
  EXPECT_EQ(StatusOfCommand(Read(1, ~uint64_t{0} - 2, 8)), kScLbaOutOfRange);
  Command dsm{};
  dsm.opcode = kOpDatasetManagement;
  dsm.nsid = kNamespaceId;
  dsm.cdw10 = 1;  // two ranges
  dsm.cdw11 = kDsmAttributeDeallocate;
  EXPECT_EQ(StatusOfCommand(dsm), kScInvalidField);
  ExpectStillServes();
}

TEST_F(NvmeValidationTest, WritesToAReadOnlyDiskAreRefused) {
  Make(true);
  Command c = Read(1, 0, 8);
  c.opcode = kOpWrite;
  EXPECT_EQ(StatusOfCommand(c), kScReadOnly);
  c.opcode = kOpWriteZeroes;
  EXPECT_EQ(StatusOfCommand(c), kScReadOnly);
  ExpectStillServes();
}

TEST_F(NvmeValidationTest, PrpEntriesUnalignedOrPastThePool) {
  Command c = Read(1, 0, 8);
  c.dptr[0] = 100;  // not a sector
  EXPECT_EQ(StatusOfCommand(c), kScPrpInvalidOffset);
  c = Read(1, 0, 8);
  c.dptr[0] = 2048;
  c.dptr[1] = 5 * kPage + 512;  // PRP2 must start a page
  EXPECT_EQ(StatusOfCommand(c), kScPrpInvalidOffset);
  c = Read(1, 0, 8);
  c.dptr[0] = kDataPages * kPage;  // just past the data area
  EXPECT_EQ(StatusOfCommand(c), kScDataTransferError);
  c = Read(1, 0, 8);
  c.dptr[0] = ~uint64_t{0} - 511;
  EXPECT_EQ(StatusOfCommand(c), kScDataTransferError);
  // A list entry past the pool, and one inside a page.
  c = Read(1, 0, 24);
  c.dptr[1] = kList;
  Prp(kList, 0) = 2 * kPage;
  Prp(kList, 1) = uint64_t{1000} * kPage;
  EXPECT_EQ(StatusOfCommand(c), kScDataTransferError);
  Prp(kList, 1) = 3 * kPage + 8;
  EXPECT_EQ(StatusOfCommand(c), kScPrpInvalidOffset);
  // The list pointer itself past the pool.
  c.dptr[1] = kDataPages * kPage;
  EXPECT_EQ(StatusOfCommand(c), kScDataTransferError);
  ExpectStillServes();
}

TEST_F(NvmeValidationTest, PrpListsThatLoopOrOverrunMdtsAreRefused) {
  // A list starting at its page's last entry, whose link points back at
  // its own page: a loop.
  Command c = Read(1, 0, 24);
  c.dptr[1] = kList + kPage - 8;
  Prp(kList, 511) = kList;
  EXPECT_EQ(StatusOfCommand(c), kScInvalidField);
  // One data entry, then a link back to the page the list started in.
  c = Read(1, 0, 40);
  c.dptr[1] = kList + kPage - 16;
  Prp(kList, 510) = 2 * kPage;
  Prp(kList, 511) = kList;
  EXPECT_EQ(StatusOfCommand(c), kScInvalidField);
  // More than max_segments pages (MDTS), however described.
  c = Read(1, 0, 8 * kMaxSegments + 8);
  c.dptr[1] = kList;
  EXPECT_EQ(StatusOfCommand(c), kScInvalidField);
  // max_segments pages but starting inside a page: one page too many.
  c = Read(1, 0, 8 * kMaxSegments);
  c.dptr[0] = 512;
  c.dptr[1] = kList;
  for (uint32_t i = 0; i < kMaxSegments; ++i) Prp(kList, i) = i * kPage;
  EXPECT_EQ(StatusOfCommand(c), kScInvalidField);
  // Exactly max_segments pages is fine.
  c.dptr[0] = 0;
  DeviceRequest out;
  ASSERT_EQ(Submit(c, &out), TakeResult::kValid);
  EXPECT_EQ(out.segments.size(), kMaxSegments);
  EXPECT_EQ(Answer(out, TakeResult::kValid), kScSuccess);
}

TEST_F(NvmeValidationTest, SglSegmentsThatChainIntoThemselves) {
  // A segment whose only descriptor links back to itself.
  PutSgl(kList, 0, kList, 16, kSglSegment);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8), kList, 16, kSglSegment)),
            kScSglInvalidCount);
  // A segment with data that links back to itself: more data than the
  // command's blocks.
  PutSgl(kList, 0, 0, 4096, kSglDataBlock);
  PutSgl(kList, 1, kList, 32, kSglSegment);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 24), kList, 32, kSglSegment)),
            kScSglInvalidDataLength);
  ExpectStillServes();
}

TEST_F(NvmeValidationTest, SglDescriptorsAreChecked) {
  // Data length disagreeing with the block count, both ways.
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 16), 0, 4096, kSglDataBlock)),
            kScSglInvalidDataLength);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 4), 0, 4096, kSglDataBlock)),
            kScSglInvalidDataLength);
  // Not whole sectors; unaligned; past the pool.
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 1), 0, 100, kSglDataBlock)),
            kScSglInvalidDataLength);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 1), 8, 512, kSglDataBlock)),
            kScInvalidField);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8), kDataPages * kPage, 4096,
                                    kSglDataBlock)),
            kScDataTransferError);
  // A bit bucket (type 1) and a reserved type.
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8), 0, 4096, 0x10)),
            kScSglInvalidType);
  // A segment of a length that is no whole number of descriptors.
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8), kList, 20, kSglSegment)),
            kScSglInvalidSegment);
  // A link in a last segment; a link that is not the segment's last entry;
  // a segment that ends without one.
  PutSgl(kList, 0, 0, 4096, kSglDataBlock);
  PutSgl(kList, 1, kList + kPage, 16, kSglLastSegment);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8), kList, 32, kSglLastSegment)),
            kScSglInvalidSegment);
  PutSgl(kList, 0, kList + kPage, 16, kSglLastSegment);
  PutSgl(kList, 1, 0, 4096, kSglDataBlock);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8), kList, 32, kSglSegment)),
            kScSglInvalidSegment);
  PutSgl(kList, 0, 0, 4096, kSglDataBlock);
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8), kList, 16, kSglSegment)),
            kScSglInvalidSegment);
  // More pages than max_segments in data blocks.
  for (uint32_t i = 0; i <= kMaxSegments; ++i) {
    PutSgl(kList, i, i * kPage, 4096, kSglDataBlock);
  }
  EXPECT_EQ(StatusOfCommand(WithSgl(Read(1, 0, 8 * (kMaxSegments + 1)), kList,
                                    16 * (kMaxSegments + 1), kSglLastSegment)),
            kScInvalidField);
  ExpectStillServes();
}

TEST_F(NvmeValidationTest, AReusedCommandIdConflicts) {
  DeviceRequest first;
  ASSERT_EQ(Submit(Read(9, 0, 8), &first), TakeResult::kValid);
  // Same id while the first is in flight.
  EXPECT_EQ(StatusOfCommand(Read(9, 8, 8)), kScCommandIdConflict);
  EXPECT_EQ(Answer(first, TakeResult::kValid), kScSuccess);
  // Answered: the id is free again.
  DeviceRequest again;
  ASSERT_EQ(Submit(Read(9, 16, 8), &again), TakeResult::kValid);
  EXPECT_EQ(Answer(again, TakeResult::kValid), kScSuccess);
}

TEST_F(NvmeValidationTest, AnSqTailPastTheRingBreaksIt) {
  memory_.bells().sq_tail = kSize;
  EXPECT_TRUE(device_->ring->HasRequests());
  DeviceRequest out;
  EXPECT_EQ(device_->ring->TakeRequest(&out), TakeResult::kRingBroken);
  memory_.bells().sq_tail = 0xFFFFFFFF;
  EXPECT_EQ(device_->ring->TakeRequest(&out), TakeResult::kRingBroken);
}

TEST_F(NvmeValidationTest, ACqHeadPastWhatWasPublishedBreaksTheRing) {
  DeviceRequest out;
  memory_.bells().cq_head = 3;  // nothing was published
  memory_.sq(0) = Read(1, 0, 8);
  memory_.bells().sq_tail = 1;
  EXPECT_EQ(device_->ring->TakeRequest(&out), TakeResult::kRingBroken);
  memory_.bells().cq_head = kSize;
  EXPECT_EQ(device_->ring->TakeRequest(&out), TakeResult::kRingBroken);
}

TEST_F(NvmeValidationTest, ADriverThatNeverConsumesGetsNoOverwrite) {
  // Commands keep coming while no completion is consumed: the device stops
  // taking at size - 1 answered-or-in-flight, so it overwrites nothing.
  uint32_t taken = 0;
  for (uint32_t i = 0; i < 2 * kSize; ++i) {
    memory_.sq(i) = Read(static_cast<uint16_t>(i), 0, 8);
    memory_.bells().sq_tail = (i + 1) % kSize;
    DeviceRequest out;
    TakeResult r = device_->ring->TakeRequest(&out);
    if (r == TakeResult::kNone) break;
    ASSERT_EQ(r, TakeResult::kValid);
    device_->ring->PutResponse(out, 0);
    device_->ring->PublishResponses();
    ++taken;
  }
  EXPECT_EQ(taken, kSize - 1);
  EXPECT_FALSE(device_->ring->HasRequests());
}

TEST_F(NvmeValidationTest, RandomCommandsNeverEscape) {
  std::mt19937_64 random(46);
  for (int i = 0; i < 3000; ++i) {
    Command c;
    uint64_t words[8];
    for (uint64_t& w : words) w = random();
    std::memcpy(&c, words, sizeof(c));
    // Small addresses and counts half of the time, so that the checks past
    // the first ones run too.
    if (i % 2 == 0) {
      c.opcode = static_cast<uint8_t>(random() % 10);
      c.nsid = kNamespaceId;
      c.flags &= kFlagsPsdtMask;
      c.dptr[0] %= 70 * kPage;
      c.dptr[1] %= 70 * kPage;
      c.cdw11 = 0;
      c.cdw12 %= 200;
    }
    for (uint32_t e = 0; e < 2 * kPrpPerPage; ++e) {
      Prp(kList, e) = random() % (70 * kPage);
    }
    DeviceRequest out;
    TakeResult taken = Submit(c, &out);
    ASSERT_NE(taken, TakeResult::kNone);
    ASSERT_NE(taken, TakeResult::kRingBroken);
    for (const DataSegment& s : out.segments) {
      ASSERT_LT(s.page, kDataPages);
      ASSERT_LE(s.first_sector, s.last_sector);
      ASSERT_LT(s.last_sector, 8);
    }
    Answer(out, taken);
  }
  ExpectStillServes();
}

}  // namespace
}  // namespace pvdisk::transport
