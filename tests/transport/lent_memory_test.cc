// Lent memory (transport/lent_memory.h): a read or write whose data lies,
// page aligned, in memory lent to the queue travels on those pages: the
// backend writes from them and reads into them, with real engines and every
// protocol, split into children or not, and the data pool is not used
// (zero_copy_ios). Data anywhere else is copied through the pool as before.
#include "transport/lent_memory.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transport/blkif/protocol.h"
#include "transport/virtio/protocol.h"
#include "transport/virtio_packed/protocol.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;
using testing::Waiter;

constexpr size_t kLentBytes = size_t{4} << 20;

struct FreeDeleter {
  void operator()(uint8_t* memory) const { free(memory); }
};

using Params = std::tuple<io::EngineKind, const Protocol*, uint32_t>;

class LentMemoryTest : public testing::TransportFixture,
                       public ::testing::WithParamInterface<Params> {
 protected:
  void SetUp() override {
    testing::TransportFixture::SetUp();
    lent_.reset(static_cast<uint8_t*>(aligned_alloc(4096, kLentBytes)));
    ASSERT_NE(lent_, nullptr);
    std::memset(lent_.get(), 0xEE, kLentBytes);
    TransportConfig config;
    config.engine = std::get<0>(GetParam());
    config.protocol = std::get<1>(GetParam());
    config.max_segments = std::get<2>(GetParam());
    config.lent = LentMemory{lent_.get(), kLentBytes};
    StartTransport(config);
  }
  void TearDown() override {
    testing::TransportFixture::TearDown();  // the queues go before the memory
    lent_.reset();
  }

  // Submits `io` and waits for it.
  void RunIo(TestIo* io) {
    Submit(io);
    Wait(waiter_, ++submitted_);
  }
  TestIo* NewTestIo(BlockOp op, uint64_t sector, uint64_t sectors,
                    const uint8_t* data = nullptr) {
    if (waiter_ == nullptr) waiter_ = NewWaiter();
    return NewIo(waiter_, op, sector, sectors, data);
  }

  std::unique_ptr<uint8_t, FreeDeleter> lent_;
  Waiter* waiter_ = nullptr;
  int submitted_ = 0;
};

// 600 sectors: more than 11 pages (children with --max-segments 11) and a
// partial last page.
TEST_P(LentMemoryTest, WriteFromAndReadIntoLentPagesWithoutTheirCopy) {
  if (!transport_) return;
  constexpr uint64_t kSector = 2048;
  constexpr uint64_t kSectors = 600;
  const std::string data = Pattern(kSector, kSectors, 3);
  uint8_t* write_at = lent_.get() + 4096;
  std::memcpy(write_at, data.data(), data.size());
  TestIo* write = NewTestIo(BlockOp::kWrite, kSector, kSectors, write_at);
  RunIo(write);
  ASSERT_EQ(write->result, 0);
  EXPECT_EQ(ReadImage(kSector, kSectors), data);

  uint8_t* read_at = lent_.get() + (size_t{2} << 20);
  TestIo* read = NewTestIo(BlockOp::kRead, kSector, kSectors);
  read->read_into = read_at;
  RunIo(read);
  ASSERT_EQ(read->result, 0);
  EXPECT_EQ(read->read_data, data);
  // The backend read into the lent pages themselves.
  EXPECT_EQ(std::memcmp(read_at, data.data(), data.size()), 0);
  EXPECT_EQ(Get(Counter::zero_copy_ios), 2u);
  EXPECT_EQ(Get(Counter::errors), 0u);
  EXPECT_EQ(Get(Counter::invalid_reqs), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

TEST_P(LentMemoryTest, DataOutsideLentMemoryIsCopiedAsBefore) {
  if (!transport_) return;
  const std::string data = Pattern(64, 24, 4);
  TestIo* write = NewTestIo(BlockOp::kWrite, 64, 24,
                            reinterpret_cast<const uint8_t*>(data.data()));
  RunIo(write);
  ASSERT_EQ(write->result, 0);
  // Into lent memory, but not on a page boundary: read into the pool.
  uint8_t* unaligned = lent_.get() + 512;
  TestIo* read = NewTestIo(BlockOp::kRead, 64, 24);
  read->read_into = unaligned;
  RunIo(read);
  ASSERT_EQ(read->result, 0);
  EXPECT_EQ(read->read_data, data);
  EXPECT_EQ(unaligned[0], 0xEE);  // untouched
  // Running past the end of the lent memory: the pool too.
  TestIo* tail = NewTestIo(BlockOp::kRead, 64, 24);
  tail->read_into = lent_.get() + kLentBytes - 4096;
  RunIo(tail);
  ASSERT_EQ(tail->result, 0);
  EXPECT_EQ(tail->read_data, data);
  EXPECT_EQ(Get(Counter::zero_copy_ios), 0u);
  EXPECT_EQ(ReadImage(64, 24), data);
}

// Many at once, lent and pooled mixed, so that they merge with each other
// (neighbouring sectors) and fill the ring: each reads back its own bytes.
TEST_P(LentMemoryTest, LentAndPooledRequestsMergeAndReadBack) {
  if (!transport_) return;
  constexpr size_t kIos = 64;
  constexpr uint64_t kSectors = 16;  // two pages each
  std::vector<std::string> pooled(kIos);
  for (size_t i = 0; i < kIos; ++i) {
    const uint64_t sector = uint64_t(i) * kSectors;
    const std::string data = Pattern(sector, kSectors, 9);
    const uint8_t* from;
    if (i % 2 == 0) {
      uint8_t* at = lent_.get() + i * kSectors * 512;
      std::memcpy(at, data.data(), data.size());
      from = at;
    } else {
      pooled[i] = data;
      from = reinterpret_cast<const uint8_t*>(pooled[i].data());
    }
    Submit(NewTestIo(BlockOp::kWrite, sector, kSectors, from));
  }
  submitted_ += static_cast<int>(kIos);
  Wait(waiter_, submitted_);
  std::vector<TestIo*> reads;
  for (size_t i = 0; i < kIos; ++i) {
    TestIo* read = NewTestIo(BlockOp::kRead, uint64_t(i) * kSectors, kSectors);
    if (i % 2 == 0) {
      read->read_into = lent_.get() + (size_t{2} << 20) + i * kSectors * 512;
    }
    reads.push_back(read);
    Submit(read);
  }
  submitted_ += static_cast<int>(kIos);
  Wait(waiter_, submitted_);
  for (size_t i = 0; i < kIos; ++i) {
    const uint64_t sector = uint64_t(i) * kSectors;
    EXPECT_EQ(reads[i]->result, 0) << i;
    EXPECT_EQ(reads[i]->read_data, Pattern(sector, kSectors, 9)) << i;
  }
  EXPECT_EQ(Get(Counter::zero_copy_ios), uint64_t{kIos});
  EXPECT_EQ(Get(Counter::errors), 0u);
  EXPECT_EQ(Get(Counter::invalid_reqs), 0u);
}

std::string ParamsName(const ::testing::TestParamInfo<Params>& info) {
  return std::string(io::EngineKindName(std::get<0>(info.param))) + "_" +
         testing::ProtocolTestName(std::get<1>(info.param)) + "_segs" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    EnginesProtocolsSegments, LentMemoryTest,
    ::testing::Combine(::testing::Values(io::EngineKind::kSync,
                                         io::EngineKind::kUring),
                       ::testing::Values(&BlkifProtocol(), &VirtioProtocol(),
                                         &VirtioPackedProtocol()),
                       ::testing::Values(11u, 256u)),
    ParamsName);

TEST(LentMemoryQueueTest, PerRequestGrantsCannotTakeLentMemory) {
  std::unique_ptr<uint8_t, FreeDeleter> lent(
      static_cast<uint8_t*>(aligned_alloc(4096, 1 << 20)));
  QueueOptions options;
  options.name = "pvdisk-lent-test";
  options.disk_sectors = 2048;
  options.persistent = false;
  options.lent = LentMemory{lent.get(), 1 << 20};
  absl::StatusOr<std::unique_ptr<Queue>> queue = Queue::Create(options);
  ASSERT_FALSE(queue.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(queue.status()));
  EXPECT_NE(queue.status().message().find("persistent grants"),
            std::string::npos)
      << queue.status();
}

TEST(LentMemoryQueueTest, ABackendElsewhereCannotTakeLentMemory) {
  std::unique_ptr<uint8_t, FreeDeleter> lent(
      static_cast<uint8_t*>(aligned_alloc(4096, 1 << 20)));
  TransportOptions options;
  options.queue.name = "pvdisk-lent-elsewhere-test";
  options.queue.disk_sectors = 2048;
  options.queue.lent = LentMemory{lent.get(), 1 << 20};
  options.queues = 1;
  options.backend_elsewhere = true;
  absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Create(
      options,
      [](uint32_t,
         io::RingLender*) -> absl::StatusOr<std::unique_ptr<io::IoEngine>> {
        return absl::InternalError("no engine is made for a backend elsewhere");
      });
  ASSERT_FALSE(transport.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(transport.status()));
  EXPECT_NE(transport.status().message().find("--backend process"),
            std::string::npos)
      << transport.status();
}

}  // namespace
}  // namespace pvdisk::transport
