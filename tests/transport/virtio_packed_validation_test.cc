// PackedDeviceRing against a hostile driver: ring entries, their flags and
// buffer ids are written by hand into the shared ring, headers and indirect
// tables into the data area. Every malformed request must be refused
// (kInvalid, which BackendLoop answers with an error and counts in
// invalid_reqs) without a crash and without the device reaching outside the
// data area (CheckedGrants fails the test if it asks for such a page); where
// its status byte can be trusted, the answer writes IOERR there; and one used
// entry skips exactly the entries the device consumed, so that the device
// stays in step and the next good request is served.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "transport/grant_mapper.h"
#include "transport/virtio/format.h"
#include "transport/virtio_packed/device_ring.h"
#include "transport/virtio_packed/format.h"
#include "transport/virtio_packed/protocol.h"
#include "transport/virtio_packed/ring_view.h"
#include "virtio_memory.h"

namespace pvdisk::transport {
namespace {

namespace vp = virtio_packed;
using vp::Desc;

constexpr uint32_t kSize = 32;
constexpr uint32_t kDataPages = 16;
constexpr uint32_t kMaxSegments = 11;
constexpr uint64_t kDiskSectors = 1000;
constexpr uint64_t kPage = vp::kPageSize;
// Data in pages 0..7; header and status in page 8; indirect tables in 9.
constexpr uint64_t kHeaderAddr = 8 * kPage;
constexpr uint64_t kStatusAddr = 8 * kPage + 16;
constexpr uint64_t kIndirectAddr = 9 * kPage;

enum class StatusByte { kWritten, kUntouched };

class PackedValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    std::memset(memory_.front_ring(), 0, memory_.ring_bytes());
    DeviceLimits limits;
    limits.disk_sectors = kDiskSectors;
    limits.data_pages = kDataPages;
    limits.max_segments = kMaxSegments;
    limits.serial = "hostile";
    device_ = std::make_unique<PackedDeviceRing>(
        memory_.back_ring(), kSize, &grants_, limits, NotifyMode::kEventIdx);
  }
  void TearDown() override {
    device_.reset();
    EXPECT_EQ(grants_.refused(), 0)
        << "the device asked for pages outside the data area";
  }

  static Desc D(uint64_t addr, uint32_t len, uint16_t flags = 0) {
    return Desc{addr, len, 0, flags};
  }
  static Desc Header() { return D(kHeaderAddr, 16); }
  static Desc Status() { return D(kStatusAddr, 1, vp::kDescWrite); }
  static Desc Data(uint32_t page, bool writable) {
    return D(page * kPage, kPage, writable ? vp::kDescWrite : 0);
  }
  void SetHeader(uint32_t type, uint64_t sector = 0) {
    virtio::BlkHeader header{type, 0, sector};
    std::memcpy(memory_.front_data() + kHeaderAddr, &header, sizeof(header));
  }
  uint8_t& Byte(uint64_t addr) { return memory_.front_data()[addr]; }

  // Writes entry `position` (a position counter) with the flags and id
  // given, as they are: for hand-made inconsistencies.
  void WriteRaw(uint32_t position, Desc d) {
    const uint32_t entry = vp::EntryOf(position, kSize);
    uint16_t flags = d.flags;
    d.flags = view_.LoadFlags(entry);
    std::memcpy(&view_.At(entry), &d, sizeof(d));
    view_.StoreFlags(entry, flags);
  }

  // Offers `chain` from the driver's position as a well-behaved driver
  // would (NEXT on all but the last, AVAIL/USED for each entry's own lap,
  // `id` everywhere, the first entry's flags last), unless `flip_lap_at`
  // names an entry of the chain that gets the bits of the wrong lap.
  void Offer(std::vector<Desc> chain, uint16_t id, int flip_lap_at = -1) {
    for (size_t i = chain.size(); i-- > 0;) {
      const uint32_t position = pos_ + static_cast<uint32_t>(i);
      Desc d = chain[i];
      bool wrap = vp::WrapOf(position, kSize);
      if (static_cast<int>(i) == flip_lap_at) wrap = !wrap;
      d.flags |= vp::AvailBits(wrap);
      if (i + 1 < chain.size()) d.flags |= vp::kDescNext;
      d.id = id;
      WriteRaw(position, d);
    }
    pos_ += static_cast<uint32_t>(chain.size());
  }

  void Table(const std::vector<Desc>& entries, uint64_t addr = kIndirectAddr) {
    std::memcpy(memory_.front_data() + addr, entries.data(),
                entries.size() * sizeof(Desc));
  }

  // Takes the next request, expecting `expected`; answers it as BackendLoop
  // does and publishes; checks the used entry (id, bytes written) and the
  // status byte, and that it skips `consumed` entries.
  DeviceRequest Expect(TakeResult expected, StatusByte status,
                       uint32_t consumed, uint16_t id) {
    DeviceRequest request;
    EXPECT_EQ(device_->TakeRequest(&request), expected);
    if (expected != TakeResult::kAnswered) {
      device_->PutResponse(request, expected == TakeResult::kValid ? 0
                                    : expected == TakeResult::kUnsupported
                                        ? -EOPNOTSUPP
                                        : -EINVAL);
    }
    EXPECT_NE(device_->PublishResponses(), PushResult::kNothing);
    const uint32_t entry = vp::EntryOf(used_, kSize);
    EXPECT_EQ(view_.LoadFlags(entry) & vp::kOwnerBits,
              vp::UsedBits(vp::WrapOf(used_, kSize)))
        << "no used entry where the driver looks";
    const Desc used = view_.Copy(entry);
    EXPECT_EQ(used.id, id);
    if (status == StatusByte::kWritten) {
      EXPECT_EQ(Byte(kStatusAddr),
                expected == TakeResult::kValid         ? virtio::kStatusOk
                : expected == TakeResult::kUnsupported ? virtio::kStatusUnsupp
                                                       : virtio::kStatusIoErr);
      if (expected != TakeResult::kValid) {
        EXPECT_EQ(used.len, 1u);
      }
    } else {
      EXPECT_EQ(used.len, 0u);
      EXPECT_EQ(Byte(kStatusAddr), 0xff) << "status written where not trusted";
    }
    used_ += consumed;
    EXPECT_EQ(grants_.outstanding(), 0);
    return request;
  }

  void ExpectInvalid(StatusByte status, uint32_t consumed, uint16_t id) {
    Expect(TakeResult::kInvalid, status, consumed, id);
  }

  // A well-formed one-page read, offered and served.
  void ExpectGoodReadServed(uint16_t id = 1) {
    SetHeader(virtio::kTypeIn, 8);
    Byte(kStatusAddr) = 0xff;
    Offer({Header(), Data(0, true), Status()}, id);
    DeviceRequest request =
        Expect(TakeResult::kValid, StatusByte::kWritten, 3, id);
    EXPECT_EQ(request.op, BlockOp::kRead);
    EXPECT_EQ(request.sector, 8u);
  }

  void ExpectGoodFlushServed(uint16_t id = 2) {
    SetHeader(virtio::kTypeFlush);
    Byte(kStatusAddr) = 0xff;
    Offer({Header(), Status()}, id);
    Expect(TakeResult::kValid, StatusByte::kWritten, 2, id);
  }

  void SetUpStatus() { Byte(kStatusAddr) = 0xff; }

  testing::RingMemory memory_{kSize, kDataPages,
                              VirtioPackedProtocol().RingBytes(kSize)};
  vp::RingView view_{memory_.front_ring(), kSize};
  std::unique_ptr<GrantMapper> persistent_ =
      NewPersistentGrants(memory_.back_data());
  testing::CheckedGrants grants_{persistent_.get(), kDataPages};
  std::unique_ptr<PackedDeviceRing> device_;
  uint32_t pos_ = 0;   // the driver's position counter
  uint32_t used_ = 0;  // where the next used entry must appear
};

TEST_F(PackedValidationTest, HandBuiltRequestsAreServed) {
  for (int i = 0; i < 3 * static_cast<int>(kSize); ++i) ExpectGoodReadServed();
  EXPECT_FALSE(device_->HasRequests());
}

TEST_F(PackedValidationTest, WrapInconsistentHeadIsInvalidAndSkipsOneEntry) {
  SetUpStatus();
  // AVAIL = USED = the device's wrap counter at a position it has not
  // used: "used" where nothing was used.
  WriteRaw(0, Desc{kHeaderAddr, 16, 4, vp::UsedBits(true)});
  pos_ = 1;
  ASSERT_TRUE(device_->HasRequests());
  ExpectInvalid(StatusByte::kUntouched, 1, 4);
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, WrapInconsistentHeadInTheSecondLap) {
  for (int i = 0; i < 11; ++i) ExpectGoodReadServed();  // 33 entries
  SetUpStatus();
  // Lap 1 (wrap counter 0): both bits clear means "used in lap 1".
  WriteRaw(pos_, Desc{kHeaderAddr, 16, 2, vp::UsedBits(false)});
  ++pos_;
  ExpectInvalid(StatusByte::kUntouched, 1, 2);
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, BufferIdOutOfRange) {
  SetHeader(virtio::kTypeIn);
  SetUpStatus();
  Offer({Header(), Data(0, true), Status()}, kSize);
  // The chain is sound: its status byte gets IOERR.
  ExpectInvalid(StatusByte::kWritten, 3, kSize);
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, BufferIdAlreadyInFlight) {
  SetHeader(virtio::kTypeFlush);
  SetUpStatus();
  Offer({Header(), Status()}, 5);
  DeviceRequest first;
  ASSERT_EQ(device_->TakeRequest(&first), TakeResult::kValid);
  // The same id again while the first is in flight.
  Offer({Header(), Status()}, 5);
  DeviceRequest second;
  ASSERT_EQ(device_->TakeRequest(&second), TakeResult::kInvalid);
  // Answering the second does not free the first's id.
  device_->PutResponse(second, -EINVAL);
  EXPECT_EQ(Byte(kStatusAddr), virtio::kStatusIoErr);
  Offer({Header(), Status()}, 5);
  DeviceRequest third;
  ASSERT_EQ(device_->TakeRequest(&third), TakeResult::kInvalid);
  device_->PutResponse(third, -EINVAL);
  device_->PutResponse(first, 0);
  device_->PublishResponses();
  used_ = 6;
  // Now 5 is free again.
  SetUpStatus();
  Offer({Header(), Status()}, 5);
  Expect(TakeResult::kValid, StatusByte::kWritten, 2, 5);
}

// The driver hands over entries the device still owns (taken, not
// answered): while it owns all of them nothing is available; a chain that
// runs into them is invalid at the first one.
TEST_F(PackedValidationTest, EntriesStillOwnedByTheDeviceAreNotReadAgain) {
  SetHeader(virtio::kTypeFlush);
  std::vector<DeviceRequest> taken;
  for (uint16_t id = 0; id < kSize / 2; ++id) {
    Offer({Header(), Status()}, id);
    taken.emplace_back();
    ASSERT_EQ(device_->TakeRequest(&taken.back()), TakeResult::kValid);
  }
  // All 32 entries are the device's. The driver offers entry 0 again.
  Offer({Header(), Status()}, 20);
  EXPECT_FALSE(device_->HasRequests());
  DeviceRequest request;
  EXPECT_EQ(device_->TakeRequest(&request), TakeResult::kNone);
  pos_ -= 2;
  // One answer gives entries 0 and 1 back; a three-entry chain from there
  // runs into entry 2, still the device's: invalid there, two consumed, no
  // trusted status.
  device_->PutResponse(taken[0], 0);
  device_->PublishResponses();
  used_ = 2;
  SetHeader(virtio::kTypeIn);
  SetUpStatus();
  Offer({Header(), Data(0, true), Status()}, 21);
  ExpectInvalid(StatusByte::kUntouched, 2, 21);
  EXPECT_FALSE(device_->HasRequests());
  for (size_t i = 1; i < taken.size(); ++i) device_->PutResponse(taken[i], 0);
  device_->PublishResponses();
  used_ += 30;
  pos_ = 34;
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, ChainAcrossTheRingEndMustFlipItsBits) {
  // Move to entry 30 (lap 0).
  for (int i = 0; i < 10; ++i) ExpectGoodReadServed();
  ASSERT_EQ(pos_, 30u);
  // A correct chain across the end: entries 30, 31 (wrap 1), 0 (wrap 0).
  SetHeader(virtio::kTypeIn);
  SetUpStatus();
  Offer({Header(), Data(0, true), Status()}, 3);
  Expect(TakeResult::kValid, StatusByte::kWritten, 3, 3);
  // Move round to entry 30 of lap 1 and do it wrong: the entry after the
  // end keeps the old lap's bits.
  for (int i = 0; i < 9; ++i) ExpectGoodReadServed();
  ExpectGoodFlushServed();
  ASSERT_EQ(pos_, 62u);
  SetHeader(virtio::kTypeIn);
  SetUpStatus();
  Offer({Header(), Data(0, true), Status()}, 3, /*flip_lap_at=*/2);
  ExpectInvalid(StatusByte::kUntouched, 2, 3);
  pos_ = 64;  // the driver moves on past what the device consumed
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, ChainWithAnEntryOfTheWrongLapInTheMiddle) {
  SetHeader(virtio::kTypeIn);
  SetUpStatus();
  Offer({Header(), Data(0, true), Status()}, 3, /*flip_lap_at=*/1);
  ExpectInvalid(StatusByte::kUntouched, 1, 3);
  pos_ = 1;
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, ChainLongerThanTheRing) {
  // Every entry says NEXT, round and round.
  SetUpStatus();
  for (uint32_t i = kSize; i-- > 0;) {
    WriteRaw(i,
             Desc{kHeaderAddr, 16, 7,
                  static_cast<uint16_t>(vp::AvailBits(true) | vp::kDescNext)});
  }
  ExpectInvalid(StatusByte::kUntouched, kSize, 7);
  pos_ = kSize;
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, IndirectTableInAChain) {
  SetHeader(virtio::kTypeIn);
  Table({Data(0, true), Status()});
  SetUpStatus();
  Offer({Header(), D(kIndirectAddr, 32, vp::kDescIndirect)}, 3);
  ExpectInvalid(StatusByte::kUntouched, 2, 3);
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, IndirectWithNext) {
  SetHeader(virtio::kTypeIn);
  Table({Header(), Data(0, true), Status()});
  SetUpStatus();
  Offer({D(kIndirectAddr, 48, vp::kDescIndirect), Status()}, 3);
  ExpectInvalid(StatusByte::kUntouched, 1, 3);
  pos_ -= 1;  // the device stopped at the indirect entry
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, IndirectTableIsServed) {
  SetHeader(virtio::kTypeOut, 16);
  Table({Header(), Data(2, false), Data(3, false), Data(4, false), Status()});
  SetUpStatus();
  Offer({D(kIndirectAddr, 80, vp::kDescIndirect)}, 9);
  DeviceRequest request =
      Expect(TakeResult::kValid, StatusByte::kWritten, 1, 9);
  EXPECT_TRUE(request.indirect);
  EXPECT_EQ(request.op, BlockOp::kWrite);
  EXPECT_EQ(request.num_sectors, 24u);
}

TEST_F(PackedValidationTest, MalformedIndirectTables) {
  SetHeader(virtio::kTypeIn);
  struct Case {
    const char* what;
    Desc pointer;
    std::vector<Desc> table;
  };
  const std::vector<Case> cases = {
      {"length zero", D(kIndirectAddr, 0, vp::kDescIndirect), {}},
      {"length not whole entries",
       D(kIndirectAddr, 40, vp::kDescIndirect),
       {Header(), Data(0, true), Status()}},
      {"longer than a request needs",
       D(kIndirectAddr, (kMaxSegments + 3) * 16, vp::kDescIndirect),
       {}},
      {"outside the data area",
       D(kDataPages * kPage - 16, 48, vp::kDescIndirect),
       {}},
      {"nested",
       D(kIndirectAddr, 32, vp::kDescIndirect),
       {Header(), D(kIndirectAddr, 32, vp::kDescIndirect)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Table(c.table);
    SetUpStatus();
    Offer({c.pointer}, 3);
    ExpectInvalid(StatusByte::kUntouched, 1, 3);
  }
  ExpectGoodReadServed();
}

// The request format's own rules come from the decoder shared with the
// split queue; a few of them through this ring.
TEST_F(PackedValidationTest, SharedRequestRules) {
  SetHeader(virtio::kTypeIn);
  SetUpStatus();
  Offer({Header(), Status(), Data(0, false)}, 3);  // readable after writable
  ExpectInvalid(StatusByte::kUntouched, 3, 3);
  SetUpStatus();
  Offer({Header(), Data(0, false), Status()}, 3);  // IN from readable data
  ExpectInvalid(StatusByte::kWritten, 3, 3);
  SetHeader(virtio::kTypeIn, kDiskSectors - 1);
  SetUpStatus();
  Offer({Header(), Data(0, true), Status()}, 3);  // past the disk's end
  ExpectInvalid(StatusByte::kWritten, 3, 3);
  SetHeader(1234);
  SetUpStatus();
  Offer({Header(), Status()}, 3);
  Expect(TakeResult::kUnsupported, StatusByte::kWritten, 2, 3);
  ExpectGoodReadServed();
}

TEST_F(PackedValidationTest, GetIdIsAnsweredByTheRing) {
  SetHeader(virtio::kTypeGetId);
  SetUpStatus();
  Offer({Header(), D(2 * kPage, 20, vp::kDescWrite), Status()}, 6);
  DeviceRequest request;
  ASSERT_EQ(device_->TakeRequest(&request), TakeResult::kAnswered);
  device_->PublishResponses();
  const Desc used = view_.Copy(0);
  EXPECT_EQ(used.id, 6u);
  EXPECT_EQ(used.len, 21u);
  EXPECT_EQ(std::memcmp(memory_.front_data() + 2 * kPage, "hostile", 7), 0);
  EXPECT_EQ(Byte(kStatusAddr), virtio::kStatusOk);
}

// Random bytes in every entry, taken and answered in a loop: whatever the
// device makes of them, it answers everything it takes, never reaches
// outside the data area, and never returns a request that consumed nothing.
TEST_F(PackedValidationTest, GarbageEntriesNeverBreakTheDevice) {
  std::mt19937 random(16);
  for (int round = 0; round < 200; ++round) {
    for (uint32_t entry = 0; entry < kSize; ++entry) {
      Desc d;
      d.addr = random() % 2 ? random() % (kDataPages * kPage + 64)
                            : (uint64_t{random()} << 32) | random();
      d.len = random() % 3 ? random() % 8192 : random();
      d.id = static_cast<uint16_t>(random() % (kSize + 4));
      d.flags = static_cast<uint16_t>(random());
      std::memcpy(&view_.At(entry), &d, sizeof(d));
    }
    std::vector<DeviceRequest> taken;
    for (int i = 0; i < 40; ++i) {
      DeviceRequest request;
      TakeResult result = device_->TakeRequest(&request);
      if (result == TakeResult::kNone) break;
      ASSERT_NE(result, TakeResult::kRingBroken);
      if (result != TakeResult::kAnswered) taken.push_back(request);
    }
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
      device_->PutResponse(*it, -EINVAL);
    }
    device_->PublishResponses();
    device_->FinalCheckForRequests();
    EXPECT_EQ(grants_.outstanding(), 0);
  }
}

}  // namespace
}  // namespace pvdisk::transport
