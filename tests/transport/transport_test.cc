// FrontendQueue and BackendLoop end to end, without FUSE: a
// transport::Transport over a real image file and real I/O engines. The
// single-queue tests here run over both engines and both ring protocols; the
// configuration matrix (protocol, queues, ring size, segments, grants,
// notification) is below them.
#include "transport/transport.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "stats/counters.h"
#include "transport/blkif/protocol.h"
#include "transport/block_io.h"
#include "transport/nvme/protocol.h"
#include "transport/protocol.h"
#include "transport/queue.h"
#include "transport/virtio/protocol.h"
#include "transport/virtio_packed/protocol.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Bytes;
using testing::kImageSectors;
using testing::kTimeout;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;
using testing::Waiter;
using namespace std::chrono_literals;

// Either virtio ring layout: the same chains, the same table pages.
bool IsVirtio(const Protocol* protocol) {
  return protocol == &VirtioProtocol() || protocol == &VirtioPackedProtocol();
}

// Whether a ring request of `pages` data pages goes out of the ring: blkif
// puts 11 segments in the slot; virtio chains header, 2 pages and status
// directly, longer chains go into an indirect table; NVMe's PRP1 and PRP2
// hold 2 pages, more need a PRP list, and its SGL1 is one data block, which
// is all the pool's contiguous pages need.
bool IsIndirect(const Protocol* protocol, uint64_t pages,
                DataPointerMode data = DataPointerMode::kPrp) {
  if (protocol == &NvmeProtocol()) {
    return data == DataPointerMode::kPrp && pages > 2;
  }
  return pages > (IsVirtio(protocol) ? 2u : 11u);
}

using EngineAndProtocol = std::tuple<io::EngineKind, const Protocol*>;

std::string EngineAndProtocolName(
    const ::testing::TestParamInfo<EngineAndProtocol>& info) {
  return std::string(io::EngineKindName(std::get<0>(info.param))) + "_" +
         testing::ProtocolTestName(std::get<1>(info.param));
}

// One queue over the parameters' engine and protocol; direct (blkif)
// requests only unless a test asks for more segments.
class TransportTest : public testing::TransportFixture,
                      public ::testing::WithParamInterface<EngineAndProtocol> {
 protected:
  static io::EngineKind engine() { return std::get<0>(GetParam()); }
  static const Protocol* protocol() { return std::get<1>(GetParam()); }

  // A configuration over the parameters' engine and protocol.
  static TransportConfig BaseConfig() {
    TransportConfig config;
    config.engine = engine();
    config.protocol = protocol();
    return config;
  }

  void StartQueue(uint32_t ring_size = kDefaultRingSize,
                  uint32_t max_segments = 11,
                  std::optional<io::FaultRange> fault = std::nullopt,
                  bool start = true) {
    TransportConfig config = BaseConfig();
    config.ring_size = ring_size;
    config.max_segments = max_segments;
    config.fault = fault;
    StartTransport(config, start);
  }
};

TEST_P(TransportTest, SmallWriteThenReadBack) {
  StartQueue();
  if (!transport_) return;
  std::string data = Pattern(7, 3, 1);
  TestIo* write = Run(BlockOp::kWrite, 7, 3, &data);
  EXPECT_EQ(write->result, 0);
  EXPECT_EQ(write->calls, 1);
  EXPECT_TRUE(write->read_data.empty());

  TestIo* read = Run(BlockOp::kRead, 7, 3);
  EXPECT_EQ(read->result, 0);
  EXPECT_EQ(read->calls, 1);
  EXPECT_EQ(read->read_data, data);
  EXPECT_EQ(ReadImage(7, 3), data);
  // The sectors around it are untouched.
  EXPECT_EQ(ReadImage(6, 1), std::string(512, '\0'));
  EXPECT_EQ(ReadImage(10, 1), std::string(512, '\0'));

  EXPECT_EQ(Get(Counter::reqs_write), 1u);
  EXPECT_EQ(Get(Counter::reqs_read), 1u);
  EXPECT_EQ(Get(Counter::sectors_written), 3u);
  EXPECT_EQ(Get(Counter::sectors_read), 3u);
  EXPECT_EQ(Get(Counter::segments), 2u);
  EXPECT_EQ(Get(Counter::splits), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_EQ(Get(Counter::inflight_max), 1u);
  EXPECT_EQ(Get(Counter::kicks_sent), 2u);  // the backend slept in between
  EXPECT_EQ(Get(Counter::irqs_sent), 2u);
  EXPECT_EQ(Get(Counter::errors), 0u);
  EXPECT_EQ(Get(Counter::invalid_reqs), 0u);
}

TEST_P(TransportTest, OneMebibyteIsSplitIntoRingRequests) {
  StartQueue();
  if (!transport_) return;
  constexpr uint64_t kSector = 4096;
  constexpr uint64_t kSectors = 2048;  // 1 MiB
  std::string data = Pattern(kSector, kSectors, 2);
  TestIo* write = Run(BlockOp::kWrite, kSector, kSectors, &data);
  ASSERT_EQ(write->result, 0);
  // 11 pages = 88 sectors per ring request: ceil(2048 / 88) = 24.
  EXPECT_EQ(Get(Counter::reqs_write), 24u);
  EXPECT_EQ(Get(Counter::splits), 23u);
  EXPECT_EQ(Get(Counter::sectors_written), kSectors);
  EXPECT_EQ(Get(Counter::segments), 256u);  // 23 * 11 + 3 pages
  EXPECT_EQ(ReadImage(kSector, kSectors), data);

  TestIo* read = Run(BlockOp::kRead, kSector, kSectors);
  ASSERT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == data) << "read data differs";
  EXPECT_EQ(Get(Counter::reqs_read), 24u);
  EXPECT_EQ(Get(Counter::splits), 46u);
  EXPECT_EQ(Get(Counter::sectors_read), kSectors);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_EQ(Get(Counter::inflight_max), 24u);
  EXPECT_EQ(Get(Counter::ring_full), 0u);

  // An unaligned piece inside it.
  TestIo* part = Run(BlockOp::kRead, kSector + 85, 7);
  ASSERT_EQ(part->result, 0);
  EXPECT_TRUE(part->read_data == data.substr(85 * 512, 7 * 512));
}

TEST_P(TransportTest, WriteLargerThanTheRingIsStagedAndCopied) {
  StartQueue(/*ring_size=*/32);
  if (!transport_) return;
  // 40 ring requests do not fit on a 32-slot ring at once.
  constexpr uint64_t kSectors = 40 * 88;
  std::string data = Pattern(0, kSectors, 3);
  std::string buffer = data;
  Waiter* waiter = NewWaiter();
  TestIo* io = NewIo(waiter, BlockOp::kWrite, 0, kSectors, Bytes(buffer));
  Submit(io);
  // The data only had to stay valid until Submit() returned.
  std::memset(buffer.data(), 0xEE, buffer.size());
  Wait(waiter, 1);
  if (hung_) return;
  EXPECT_EQ(io->result, 0);
  EXPECT_EQ(io->calls, 1);
  EXPECT_GE(Get(Counter::ring_full), 1u);
  EXPECT_EQ(Get(Counter::reqs_write), 40u);
  EXPECT_EQ(Get(Counter::splits), 39u);
  EXPECT_LE(Get(Counter::inflight_max), 32u);
  EXPECT_TRUE(ReadImage(0, kSectors) == data) << "image differs";

  TestIo* read = Run(BlockOp::kRead, 0, kSectors / 2);
  ASSERT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == data.substr(0, kSectors / 2 * 512));
}

TEST_P(TransportTest, ManyConcurrentWritesFillTheRing) {
  constexpr uint32_t kRingSize = 32;
  StartQueue(kRingSize);
  if (!transport_) return;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  constexpr int kTotal = kThreads * kPerThread;
  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> ios;
  for (int i = 0; i < kTotal; ++i) {
    ios.push_back(NewIo(waiter, BlockOp::kWrite, uint64_t{8} * i, 8, nullptr));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string buffer;
      for (int k = 0; k < kPerThread; ++k) {
        int i = t * kPerThread + k;
        // One buffer per thread, overwritten as soon as Submit() returns.
        buffer = Pattern(uint64_t{8} * i, 8, 4);
        ios[i]->write_data = Bytes(buffer);
        Submit(ios[i]);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Wait(waiter, kTotal);
  if (hung_) return;
  for (int i = 0; i < kTotal; ++i) {
    ASSERT_EQ(ios[i]->result, 0) << i;
    ASSERT_EQ(ios[i]->calls, 1) << i;
  }
  EXPECT_GT(Get(Counter::ring_full), 0u);
  // Adjacent writes that waited together in the staging queue merged: every
  // BlockIo is either its own ring request or merged into one.
  EXPECT_EQ(Get(Counter::reqs_write) + Get(Counter::merges_write),
            uint64_t{kTotal});
  EXPECT_EQ(Get(Counter::sectors_written), uint64_t{kTotal} * 8);
  EXPECT_EQ(Get(Counter::segments), uint64_t{kTotal});
  EXPECT_EQ(Get(Counter::splits), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_GT(Get(Counter::inflight_max), 1u);
  EXPECT_LE(Get(Counter::inflight_max), kRingSize);
  EXPECT_GE(Get(Counter::engine_inflight_max), 1u);
  EXPECT_LE(Get(Counter::engine_inflight_max), kRingSize);
  EXPECT_GT(Get(Counter::kicks_sent), 0u);
  EXPECT_GT(Get(Counter::irqs_sent), 0u);
  EXPECT_EQ(Get(Counter::errors), 0u);

  // Read everything back through the queue, 1 MiB at a time.
  const uint64_t total_sectors = uint64_t{kTotal} * 8;
  std::string expected = Pattern(0, total_sectors, 4);
  for (uint64_t first = 0; first < total_sectors; first += 2048) {
    uint64_t count = std::min<uint64_t>(2048, total_sectors - first);
    TestIo* read = Run(BlockOp::kRead, first, count);
    ASSERT_EQ(read->result, 0);
    ASSERT_TRUE(read->read_data == expected.substr(first * 512, count * 512))
        << "data differs in sectors " << first << "+" << count;
  }
}

TEST_P(TransportTest, ConcurrentReadsReturnTheirOwnData) {
  StartQueue(/*ring_size=*/32);
  if (!transport_) return;
  constexpr uint64_t kSectors = 4096;
  std::string data = Pattern(0, kSectors, 5);
  ASSERT_EQ(Run(BlockOp::kWrite, 0, kSectors, &data)->result, 0);

  constexpr int kReads = 300;
  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> reads;
  for (int i = 0; i < kReads; ++i) {
    // Sizes from 1 sector to 200 sectors (3 ring requests), all over.
    uint64_t sectors = 1 + (static_cast<uint64_t>(i) * 37) % 200;
    uint64_t sector = (static_cast<uint64_t>(i) * 101) % (kSectors - sectors);
    reads.push_back(NewIo(waiter, BlockOp::kRead, sector, sectors, nullptr));
  }
  std::thread other([&] {
    for (int i = 1; i < kReads; i += 2) Submit(reads[i]);
  });
  for (int i = 0; i < kReads; i += 2) Submit(reads[i]);
  other.join();
  Wait(waiter, kReads);
  if (hung_) return;
  for (TestIo* read : reads) {
    ASSERT_EQ(read->result, 0);
    ASSERT_TRUE(read->read_data ==
                data.substr(read->sector * 512, read->num_sectors * 512))
        << "read of " << read->sector << "+" << read->num_sectors;
  }
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_LE(Get(Counter::inflight_max), 32u);
}

TEST_P(TransportTest, FlushAndDiscardAndWriteZeroes) {
  StartQueue();
  if (!transport_) return;
  constexpr uint64_t kSector = 2048;
  std::string data = Pattern(kSector, 64, 6);
  ASSERT_EQ(Run(BlockOp::kWrite, kSector, 64, &data)->result, 0);

  TestIo* flush = Run(BlockOp::kFlush, 0, 0);
  EXPECT_EQ(flush->result, 0);
  EXPECT_EQ(Get(Counter::reqs_flush), 1u);

  TestIo* discard = Run(BlockOp::kDiscard, kSector + 8, 16);
  EXPECT_EQ(discard->result, 0);
  TestIo* zeroes = Run(BlockOp::kWriteZeroes, kSector + 40, 8);
  EXPECT_EQ(zeroes->result, 0);
  EXPECT_EQ(Get(Counter::reqs_discard), 2u);
  EXPECT_EQ(Get(Counter::segments), 8u);  // only the write carried data

  std::string expected = data;
  std::memset(expected.data() + 8 * 512, 0, 16 * 512);
  std::memset(expected.data() + 40 * 512, 0, 8 * 512);
  TestIo* read = Run(BlockOp::kRead, kSector, 64);
  ASSERT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == expected) << "discarded range not zero";
  EXPECT_TRUE(ReadImage(kSector, 64) == expected);
}

TEST_P(TransportTest, InjectedErrorReachesTheBlockIoAndTheQueueGoesOn) {
  constexpr uint64_t kBad = 1024;
  StartQueue(kDefaultRingSize, 11, io::FaultRange{kBad, 8});
  if (!transport_) return;
  std::string data = Pattern(kBad, 8, 7);
  TestIo* write = Run(BlockOp::kWrite, kBad, 8, &data);
  EXPECT_EQ(write->result, -EIO);
  EXPECT_EQ(write->calls, 1);
  EXPECT_EQ(Get(Counter::errors), 1u);
  EXPECT_EQ(ReadImage(kBad, 8), std::string(8 * 512, '\0'));

  TestIo* read = Run(BlockOp::kRead, kBad - 4, 8);  // overlaps the range
  EXPECT_EQ(read->result, -EIO);
  EXPECT_TRUE(read->read_data.empty());
  EXPECT_EQ(Get(Counter::errors), 2u);

  // A split write with one failing part fails as a whole, once.
  std::string big = Pattern(0, 2048, 7);
  TestIo* split = Run(BlockOp::kWrite, 0, 2048, &big);
  EXPECT_EQ(split->result, -EIO);
  EXPECT_EQ(split->calls, 1);
  EXPECT_EQ(Get(Counter::errors), 3u);

  // Other sectors still work.
  std::string good = Pattern(4096, 16, 8);
  EXPECT_EQ(Run(BlockOp::kWrite, 4096, 16, &good)->result, 0);
  TestIo* again = Run(BlockOp::kRead, 4096, 16);
  EXPECT_EQ(again->result, 0);
  EXPECT_EQ(again->read_data, good);
  EXPECT_EQ(Get(Counter::errors), 3u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

// The same with indirect requests and per-request grants: failed I/O still
// unmaps everything it mapped.
TEST_P(TransportTest, InjectedErrorWithIndirectRequestsAndPerRequestGrants) {
  constexpr uint64_t kBad = 4096 + 1000;
  TransportConfig config = BaseConfig();
  config.max_segments = 64;
  config.persistent = false;
  config.fault = io::FaultRange{kBad, 1};
  StartTransport(config);
  if (!transport_) return;
  std::string big = Pattern(4096, 2048, 14);
  TestIo* write = Run(BlockOp::kWrite, 4096, 2048, &big);
  EXPECT_EQ(write->result, -EIO);
  EXPECT_EQ(write->calls, 1);
  EXPECT_EQ(Get(Counter::reqs_write), 4u);  // 512 sectors each
  EXPECT_EQ(Get(Counter::indirect_reqs), 4u);
  EXPECT_EQ(Get(Counter::errors), 1u);
  TestIo* read = Run(BlockOp::kRead, 4096, 2048);
  EXPECT_EQ(read->result, -EIO);
  EXPECT_TRUE(read->read_data.empty());
  EXPECT_EQ(Get(Counter::errors), 2u);
  // The parts that did not fail were written.
  TestIo* first = Run(BlockOp::kRead, 4096, 512);
  ASSERT_EQ(first->result, 0);
  EXPECT_TRUE(first->read_data == big.substr(0, 512 * 512));
  EXPECT_GT(Get(Counter::grant_maps), 0u);
  EXPECT_EQ(Get(Counter::grant_maps), Get(Counter::grant_unmaps));
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

TEST_P(TransportTest, RequestPastTheEndIsRejectedByTheBackend) {
  StartQueue();
  if (!transport_) return;
  TestIo* read = Run(BlockOp::kRead, kImageSectors - 4, 8);
  EXPECT_EQ(read->result, -EIO);
  EXPECT_EQ(Get(Counter::invalid_reqs), 1u);
  EXPECT_EQ(Get(Counter::reqs_read), 0u);  // never reached the engine
  TestIo* discard = Run(BlockOp::kDiscard, kImageSectors, 8);
  EXPECT_EQ(discard->result, -EIO);
  EXPECT_EQ(Get(Counter::invalid_reqs), 2u);
  // The last sectors themselves are fine.
  TestIo* last = Run(BlockOp::kRead, kImageSectors - 8, 8);
  EXPECT_EQ(last->result, 0);
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

TEST_P(TransportTest, ShutdownWaitsForSubmittedIo) {
  StartQueue(/*ring_size=*/32);
  if (!transport_) return;
  constexpr int kCount = 200;
  Waiter* waiter = NewWaiter();
  std::string data = Pattern(0, 16, 9);
  std::vector<TestIo*> ios;
  for (int i = 0; i < kCount; ++i) {
    ios.push_back(
        NewIo(waiter, BlockOp::kWrite, uint64_t{16} * i, 16, Bytes(data)));
    Submit(ios.back());
  }
  transport_->Shutdown();
  EXPECT_EQ(waiter->done(), kCount);
  for (TestIo* io : ios) EXPECT_EQ(io->result, 0);
  transport_->Shutdown();  // idempotent
  transport_.reset();
}

TEST_P(TransportTest, ShutdownOfIdleQueueReturns) {
  StartQueue();
  if (!transport_) return;
  transport_->Shutdown();
  transport_.reset();
  SUCCEED();
}

// The largest BlockIo a queue must take whole (kMaxBlockIoSectors, 1 MiB
// plus a page, here unaligned) works with the fewest and the most segments
// per ring request.
TEST_P(TransportTest, LargestBlockIoAtBothSegmentLimits) {
  for (uint32_t max_segments : {kMinSegments, kMaxSegments}) {
    SCOPED_TRACE(max_segments);
    if (transport_) {
      transport_->Shutdown();
      transport_.reset();
      image_.reset();
    }
    StartQueue(/*ring_size=*/32, max_segments);
    if (!transport_) return;
    const uint64_t sector = 3 + max_segments;
    std::string data = Pattern(sector, kMaxBlockIoSectors, max_segments);
    ASSERT_EQ(Run(BlockOp::kWrite, sector, kMaxBlockIoSectors, &data)->result,
              0);
    TestIo* read = Run(BlockOp::kRead, sector, kMaxBlockIoSectors);
    if (hung_) return;
    ASSERT_EQ(read->result, 0);
    EXPECT_TRUE(read->read_data == data);
    const uint64_t per_request = uint64_t{max_segments} * 8;
    const uint64_t children =
        (kMaxBlockIoSectors + per_request - 1) / per_request;
    EXPECT_EQ(Get(Counter::reqs_write), children);
    EXPECT_EQ(Get(Counter::reqs_read), children);
    EXPECT_EQ(Get(Counter::splits), 2 * (children - 1));
    uint64_t indirect = 0;
    for (uint64_t c = 0; c < children; ++c) {
      const uint64_t sectors =
          std::min(per_request, kMaxBlockIoSectors - c * per_request);
      if (IsIndirect(protocol(), (sectors + 7) / 8)) ++indirect;
    }
    EXPECT_EQ(Get(Counter::indirect_reqs), 2 * indirect);
    if (max_segments > 11 || IsVirtio(protocol()) ||
        protocol() == &NvmeProtocol()) {
      EXPECT_EQ(indirect, children);
    } else {
      EXPECT_EQ(indirect, 0u);
    }
  }
}

// A read holds all its pages until every one of its ring requests is
// answered, so one needing more pages than the whole pool could never be
// served: it fails at once instead of waiting forever. One that needs
// exactly the pool works.
TEST_P(TransportTest, ReadThatCanNeverFitThePoolFailsAtOnce) {
  StartQueue(/*ring_size=*/32, /*max_segments=*/11);
  if (!transport_) return;
  const uint32_t pool_pages = transport_->queue(0).pool_pages();
  ASSERT_EQ(pool_pages, 2048u);
  // 88-sector ring requests each take a 16-page run.
  const uint64_t fits = uint64_t{pool_pages} / 16 * 88;
  TestIo* too_big = Run(BlockOp::kRead, 0, fits + 1, nullptr, 10s);
  if (hung_) return;
  EXPECT_EQ(too_big->result, -EINVAL);
  EXPECT_EQ(too_big->calls, 1);
  EXPECT_EQ(Get(Counter::reqs_read), 0u);

  std::string data = Pattern(0, fits, 10);
  ASSERT_EQ(Run(BlockOp::kWrite, 0, fits, &data)->result, 0);
  TestIo* read = Run(BlockOp::kRead, 0, fits, nullptr, 10s);
  if (hung_) return;
  EXPECT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == data);
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

TEST_P(TransportTest, ReadOnlyTransportRefusesWritesAndDiscards) {
  TransportConfig config = BaseConfig();
  config.read_only = true;
  StartTransport(config);
  if (!transport_) return;
  std::string data = Pattern(0, 8, 11);
  EXPECT_EQ(Run(BlockOp::kWrite, 0, 8, &data)->result, -EIO);
  EXPECT_EQ(Run(BlockOp::kDiscard, 0, 8)->result, -EIO);
  EXPECT_EQ(Get(Counter::invalid_reqs), 2u);
  EXPECT_EQ(Get(Counter::reqs_write), 0u);
  TestIo* read = Run(BlockOp::kRead, 0, 8);
  EXPECT_EQ(read->result, 0);
  EXPECT_EQ(read->read_data, std::string(8 * 512, '\0'));
  EXPECT_EQ(ReadImage(0, 8), std::string(8 * 512, '\0'));
}

// With 256 segments a ring request carries a whole 1 MiB BlockIo, so a
// 32-slot ring's 2048-page pool holds only 8 of them: the pool, not the
// ring, runs out first. Writes wait (their data copied aside) and reads wait
// for pages, and everything completes in order. The writes are all submitted
// before the backend starts (Submit() only fills the ring and kicks), so the
// pool runs out however fast the backend would have been.
TEST_P(TransportTest, PoolExhaustionStagesAndRecovers) {
  StartQueue(/*ring_size=*/32, /*max_segments=*/256, std::nullopt,
             /*start=*/false);
  if (!transport_) return;
  ASSERT_EQ(transport_->queue(0).pool_pages(), 2048u);
  constexpr int kCount = 40;
  constexpr uint64_t kSectors = 2048;
  const std::string data = Pattern(0, kSectors * kCount, 13);
  Waiter* writes = NewWaiter();
  std::vector<TestIo*> ios;
  {
    // Each write's data only has to live until Submit() returns.
    std::string buffer;
    for (int i = 0; i < kCount; ++i) {
      buffer = data.substr(i * kSectors * 512, kSectors * 512);
      ios.push_back(NewIo(writes, BlockOp::kWrite, i * kSectors, kSectors,
                          Bytes(buffer)));
      Submit(ios.back());
    }
  }
  transport_->Start();
  Wait(writes, kCount);
  if (hung_) return;
  for (TestIo* io : ios) ASSERT_EQ(io->result, 0);
  EXPECT_GT(Get(Counter::ring_full), 0u);
  EXPECT_LE(Get(Counter::inflight_max), 8u);  // 8 x 256 pages = the pool
  EXPECT_EQ(Get(Counter::reqs_write), uint64_t{kCount});
  EXPECT_EQ(Get(Counter::splits), 0u);
  EXPECT_EQ(Get(Counter::indirect_reqs), uint64_t{kCount});
  EXPECT_TRUE(ReadImage(0, kSectors * kCount) == data);

  Waiter* reads = NewWaiter();
  std::vector<TestIo*> read_ios;
  for (int i = 0; i < kCount; ++i) {
    // Half of them unaligned, so two ring requests and 257 pages.
    const uint64_t sector = i * kSectors + (i % 2 ? 5 : 0);
    const uint64_t sectors = std::min<uint64_t>(kSectors + (i % 2 ? 8 : 0),
                                                kSectors * kCount - sector);
    read_ios.push_back(NewIo(reads, BlockOp::kRead, sector, sectors, nullptr));
  }
  std::thread other([&] {
    for (int i = 1; i < kCount; i += 2) Submit(read_ios[i]);
  });
  for (int i = 0; i < kCount; i += 2) Submit(read_ios[i]);
  other.join();
  Wait(reads, kCount);
  if (hung_) return;
  for (TestIo* io : read_ios) {
    ASSERT_EQ(io->result, 0);
    ASSERT_TRUE(io->read_data ==
                data.substr(io->sector * 512, io->num_sectors * 512))
        << "read of " << io->sector << "+" << io->num_sectors;
  }
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

// With io_uring and persistent grants, the backend registers each queue's
// data pool as a fixed buffer when its thread creates the ring (lazily, so
// certainly by the time an I/O completed); not with per-request grants, and
// never with the sync engine.
TEST_P(TransportTest, FixedBuffersWithUringAndPersistentGrants) {
  for (bool persistent : {true, false}) {
    SCOPED_TRACE(persistent ? "persistent" : "per-request");
    if (transport_) {
      transport_->Shutdown();
      transport_.reset();
      image_.reset();
    }
    TransportConfig config = BaseConfig();
    config.queues = 3;
    config.backend_threads = 2;
    config.persistent = persistent;
    config.queue_map = QueueMap::kRoundRobin;
    StartTransport(config);
    if (!transport_) return;
    std::string data = Pattern(0, 8, 12);
    for (int i = 0; i < 3; ++i) {  // one I/O on each queue
      ASSERT_EQ(Run(BlockOp::kWrite, 0, 8, &data)->result, 0);
    }
    EXPECT_EQ(transport_->uses_fixed_buffers(),
              persistent && engine() == io::EngineKind::kUring);
    TestIo* read = Run(BlockOp::kRead, 0, 8);
    EXPECT_EQ(read->result, 0);
    EXPECT_EQ(read->read_data, data);
    // Per request: its data page; virtio also maps the table page once to
    // copy the header and once to write the status byte.
    const uint64_t maps = IsVirtio(protocol()) ? 12u : 4u;
    EXPECT_EQ(Get(Counter::grant_maps), persistent ? 0u : maps);
    EXPECT_EQ(Get(Counter::grant_unmaps), persistent ? 0u : maps);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EnginesAndProtocols, TransportTest,
    ::testing::Combine(
        ::testing::Values(io::EngineKind::kSync, io::EngineKind::kUring),
        ::testing::Values(&BlkifProtocol(), &VirtioProtocol(),
                          &VirtioPackedProtocol(), &NvmeProtocol())),
    EngineAndProtocolName);

// A virtio DISCARD takes 3 descriptors (header, segment, status) though it
// has no data pages, so with only 2 free it must wait for a response. The
// backend starts only after everything was submitted (Submit() just fills
// the ring and kicks), so the discard comes when ten 1-page writes hold 30
// of the 32 descriptors.
class VirtioTransportTest : public testing::TransportFixture {};

TEST_F(VirtioTransportTest, DiscardWaitsWhileOnlyTwoDescriptorsAreFree) {
  TransportConfig config;
  config.protocol = &VirtioProtocol();
  config.ring_size = 32;
  StartTransport(config, /*start=*/false);
  if (!transport_) return;
  const std::string data = Pattern(0, 80, 30);
  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> ios;
  for (uint64_t i = 0; i < 10; ++i) {
    ios.push_back(
        NewIo(waiter, BlockOp::kWrite, 8 * i, 8, Bytes(data) + i * 4096));
    Submit(ios.back());
  }
  ios.push_back(NewIo(waiter, BlockOp::kDiscard, 1000, 8, nullptr));
  Submit(ios.back());
  transport_->Start();
  Wait(waiter, 11);
  if (hung_) return;
  for (TestIo* io : ios) {
    EXPECT_EQ(io->result, 0) << "BlockIo at sector " << io->sector;
  }
  EXPECT_TRUE(ReadImage(0, 80) == data) << "image differs";
  EXPECT_EQ(Get(Counter::invalid_reqs), 0u);
}

// --- The configuration matrix ---
//
// A few points of protocol x queues x ring size x max_segments x grants x
// notification x queue map (not the full product), each over one engine.

std::string ConfigName(const ::testing::TestParamInfo<TransportConfig>& info) {
  const TransportConfig& c = info.param;
  std::string name =
      c.protocol != nullptr ? testing::ProtocolTestName(c.protocol) : "blkif";
  name += "_" + std::string(io::EngineKindName(c.engine));
  name += "_q" + std::to_string(c.queues);
  if (c.ring_size != kDefaultRingSize) {
    name += "_r" + std::to_string(c.ring_size);
  }
  if (c.backend_threads > 1) name += "_t" + std::to_string(c.backend_threads);
  name += "_seg" + std::to_string(c.max_segments);
  name += c.persistent ? "_persistent" : "_perrequest";
  name += c.notify == NotifyMode::kAlways ? "_always" : "_eventidx";
  if (c.irq == InterruptMode::kThread) name += "_irqthread";
  if (c.nvme_data == DataPointerMode::kSgl) name += "_sgl";
  if (c.irq_coalesce.threshold > 0) name += "_coalesce";
  if (c.queues > 1) {
    name += "_";
    for (char ch : QueueMapName(c.queue_map)) {
      if (ch != '-') name += ch;
    }
  }
  return name;
}

TransportConfig Config(io::EngineKind engine, uint32_t queues,
                       uint32_t backend_threads, uint32_t max_segments,
                       bool persistent, NotifyMode notify,
                       QueueMap map = QueueMap::kOffset) {
  TransportConfig config;
  config.engine = engine;
  config.protocol = &BlkifProtocol();
  config.queues = queues;
  config.backend_threads = backend_threads;
  config.max_segments = max_segments;
  config.persistent = persistent;
  config.notify = notify;
  config.queue_map = map;
  return config;
}

// The same with interrupts taken by a completion thread (--irq thread).
TransportConfig WithIrqThread(TransportConfig config) {
  config.irq = InterruptMode::kThread;
  return config;
}

// The same over virtio, with a ring size of its own.
TransportConfig VirtioConfig(io::EngineKind engine, uint32_t queues,
                             uint32_t backend_threads, uint32_t ring_size,
                             uint32_t max_segments, bool persistent,
                             NotifyMode notify,
                             QueueMap map = QueueMap::kOffset) {
  TransportConfig config = Config(engine, queues, backend_threads, max_segments,
                                  persistent, notify, map);
  config.protocol = &VirtioProtocol();
  config.ring_size = ring_size;
  return config;
}

// The same over the packed virtqueue.
TransportConfig Packed(TransportConfig config) {
  config.protocol = &VirtioPackedProtocol();
  return config;
}

// The same over NVMe queue pairs, with SGLs or interrupt coalescing.
TransportConfig Nvme(TransportConfig config) {
  config.protocol = &NvmeProtocol();
  return config;
}
TransportConfig Sgl(TransportConfig config) {
  config.nvme_data = DataPointerMode::kSgl;
  return config;
}
TransportConfig Coalesced(TransportConfig config) {
  config.irq_coalesce = IrqCoalesce{8, 100};
  return config;
}

class TransportMatrixTest
    : public testing::TransportFixture,
      public ::testing::WithParamInterface<TransportConfig> {};

// One BlockIo-sized piece of the mixed layout.
struct Piece {
  uint64_t sector;
  uint64_t sectors;
};

// Non-overlapping pieces of 1 sector .. 1 MiB, most of them small, some of
// unaligned sizes and nearly all at unaligned starts, packed from sector 0.
std::vector<Piece> MixedLayout(int count) {
  static constexpr uint64_t kSizes[] = {8,   8,    8,    8,    1,   3,   16,
                                        24,  64,   7,    100,  128, 256, 255,
                                        512, 1000, 2047, 2048, 8,   8};
  std::vector<Piece> pieces;
  uint64_t sector = 0;
  for (int i = 0; i < count; ++i) {
    const uint64_t sectors = kSizes[(i * 7) % std::size(kSizes)];
    pieces.push_back(Piece{sector, sectors});
    sector += sectors;
  }
  return pieces;
}

TEST_P(TransportMatrixTest, MixedConcurrentWritesReadBackAndCounters) {
  const TransportConfig& config = GetParam();
  StartTransport(config);
  if (!transport_) return;
  ASSERT_EQ(transport_->queue_count(), config.queues);

  // 1. Hundreds of concurrent writes of mixed sizes.
  constexpr int kPieces = 240;
  constexpr int kThreads = 4;
  const std::vector<Piece> layout = MixedLayout(kPieces);
  const uint64_t total = layout.back().sector + layout.back().sectors;
  ASSERT_LE(total, uint64_t{40} * 2048);  // leaves room for step 4
  const std::string expected = Pattern(0, total, 21);
  Waiter* writes_done = NewWaiter();
  std::vector<TestIo*> writes;
  for (const Piece& piece : layout) {
    writes.push_back(NewIo(writes_done, BlockOp::kWrite, piece.sector,
                           piece.sectors,
                           Bytes(expected) + piece.sector * 512));
  }
  {
    std::vector<std::thread> submitters;
    for (int t = 0; t < kThreads; ++t) {
      submitters.emplace_back([&, t] {
        for (size_t i = t; i < writes.size(); i += kThreads) Submit(writes[i]);
      });
    }
    for (auto& thread : submitters) thread.join();
  }
  Wait(writes_done, kPieces);
  if (hung_) return;
  for (TestIo* io : writes) {
    ASSERT_EQ(io->result, 0)
        << "write " << io->sector << "+" << io->num_sectors;
    ASSERT_EQ(io->calls, 1);
  }
  ASSERT_TRUE(ReadImage(0, total) == expected) << "image differs";

  // 2. Read everything back, just as concurrently.
  Waiter* reads_done = NewWaiter();
  std::vector<TestIo*> reads;
  for (const Piece& piece : layout) {
    reads.push_back(NewIo(reads_done, BlockOp::kRead, piece.sector,
                          piece.sectors, nullptr));
  }
  {
    std::vector<std::thread> submitters;
    for (int t = 0; t < kThreads; ++t) {
      submitters.emplace_back([&, t] {
        for (size_t i = t; i < reads.size(); i += kThreads) Submit(reads[i]);
      });
    }
    for (auto& thread : submitters) thread.join();
  }
  Wait(reads_done, kPieces);
  if (hung_) return;
  for (TestIo* io : reads) {
    ASSERT_EQ(io->result, 0);
    ASSERT_TRUE(io->read_data ==
                expected.substr(io->sector * 512, io->num_sectors * 512))
        << "read " << io->sector << "+" << io->num_sectors << " differs";
  }

  // 3. Counters after the mixed load, summed over the queues.
  stats::QueueSnapshot after_mixed = Totals();
  EXPECT_EQ(after_mixed.Get(Counter::sectors_written), total);
  EXPECT_EQ(after_mixed.Get(Counter::sectors_read), total);
  // Each piece is at least one ring request, unless it merged into another.
  EXPECT_GE(after_mixed.Get(Counter::reqs_write) +
                after_mixed.Get(Counter::merges_write),
            uint64_t{kPieces});
  EXPECT_GE(after_mixed.Get(Counter::reqs_read) +
                after_mixed.Get(Counter::merges_read),
            uint64_t{kPieces});
  EXPECT_EQ(after_mixed.Get(Counter::errors), 0u);
  EXPECT_EQ(after_mixed.Get(Counter::invalid_reqs), 0u);
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    EXPECT_EQ(GetQueue(q, Counter::inflight), 0u) << "queue " << q;
    // Every queue got its share.
    EXPECT_GT(GetQueue(q, Counter::reqs_write), 0u) << "queue " << q;
  }
  if (config.notify == NotifyMode::kEventIdx) {
    // Under load most pushes find the peer busy.
    EXPECT_GT(after_mixed.Get(Counter::kicks_suppressed) +
                  after_mixed.Get(Counter::irqs_suppressed),
              0u);
  }

  // 4. One aligned 1 MiB write and read: as many ring requests as
  // max_segments makes of 256 pages.
  constexpr uint64_t kBig = uint64_t{40} * 2048;
  const std::string big = Pattern(kBig, 2048, 22);
  ASSERT_EQ(Run(BlockOp::kWrite, kBig, 2048, &big)->result, 0);
  stats::QueueSnapshot after_write = Totals();
  TestIo* big_read = Run(BlockOp::kRead, kBig, 2048);
  if (hung_) return;
  ASSERT_EQ(big_read->result, 0);
  EXPECT_TRUE(big_read->read_data == big);
  stats::QueueSnapshot after_read = Totals();

  const uint64_t per_request = uint64_t{config.max_segments} * 8;
  const uint64_t children = (2048 + per_request - 1) / per_request;
  uint64_t indirect = 0;
  for (uint64_t c = 0; c < children; ++c) {
    const uint64_t pages =
        std::min<uint64_t>(per_request, 2048 - c * per_request) / 8;
    if (IsIndirect(config.protocol, pages, config.nvme_data)) ++indirect;
  }
  auto delta = [](const stats::QueueSnapshot& a, const stats::QueueSnapshot& b,
                  Counter c) { return b.Get(c) - a.Get(c); };
  EXPECT_EQ(delta(after_mixed, after_write, Counter::reqs_write), children);
  EXPECT_EQ(delta(after_mixed, after_write, Counter::splits), children - 1);
  EXPECT_EQ(delta(after_mixed, after_write, Counter::indirect_reqs), indirect);
  EXPECT_EQ(delta(after_mixed, after_write, Counter::segments), 256u);
  EXPECT_EQ(delta(after_write, after_read, Counter::reqs_read), children);
  EXPECT_EQ(delta(after_write, after_read, Counter::splits), children - 1);
  EXPECT_EQ(delta(after_write, after_read, Counter::indirect_reqs), indirect);
  switch (config.max_segments) {
    case 11:
      EXPECT_EQ(children, 24u);
      // 11 pages fit a blkif slot, not a direct virtio chain.
      if (IsIndirect(config.protocol, 11, config.nvme_data)) {
        EXPECT_EQ(delta(after_mixed, after_write, Counter::indirect_reqs), 24u);
      } else {
        EXPECT_EQ(after_read.Get(Counter::indirect_reqs), 0u);
      }
      break;
    case 32:
      EXPECT_EQ(children, 8u);
      EXPECT_EQ(after_read.Get(Counter::indirect_reqs) > 0,
                IsIndirect(config.protocol, 32, config.nvme_data));
      break;
    case 256:
      EXPECT_EQ(children, 1u);
      EXPECT_EQ(after_read.Get(Counter::indirect_reqs) > 0,
                IsIndirect(config.protocol, 256, config.nvme_data));
      break;
  }

  // 5. Grants, notifications and fixed buffers over everything.
  stats::QueueSnapshot totals = Totals();
  if (config.persistent) {
    EXPECT_EQ(totals.Get(Counter::grant_maps), 0u);
    EXPECT_EQ(totals.Get(Counter::grant_unmaps), 0u);
  } else {
    EXPECT_GE(totals.Get(Counter::grant_maps), totals.Get(Counter::segments));
    EXPECT_EQ(totals.Get(Counter::grant_maps),
              totals.Get(Counter::grant_unmaps));
  }
  // blkif notifies on every push under `always`; virtio then uses the
  // NO_NOTIFY / NO_INTERRUPT flags, which do suppress.
  // Interrupt coalescing suppresses too.
  if (config.notify == NotifyMode::kAlways && !IsVirtio(config.protocol) &&
      config.irq_coalesce.threshold == 0) {
    EXPECT_EQ(totals.Get(Counter::kicks_suppressed), 0u);
    EXPECT_EQ(totals.Get(Counter::irqs_suppressed), 0u);
  }
  EXPECT_GT(totals.Get(Counter::kicks_sent), 0u);
  EXPECT_GT(totals.Get(Counter::irqs_sent), 0u);
  EXPECT_EQ(totals.Get(Counter::errors), 0u);
  EXPECT_EQ(totals.Get(Counter::inflight), 0u);
  EXPECT_EQ(transport_->uses_fixed_buffers(),
            config.engine == io::EngineKind::kUring && config.persistent);
  EXPECT_FALSE(transport_->engine_mode().empty());
}

using io::EngineKind;
INSTANTIATE_TEST_SUITE_P(
    Configs, TransportMatrixTest,
    ::testing::Values(
        Config(EngineKind::kSync, 1, 1, 11, true, NotifyMode::kEventIdx),
        Config(EngineKind::kSync, 4, 1, 32, false, NotifyMode::kAlways),
        WithIrqThread(Config(EngineKind::kSync, 4, 1, 32, true,
                             NotifyMode::kEventIdx)),
        WithIrqThread(Config(EngineKind::kUring, 4, 2, 256, true,
                             NotifyMode::kEventIdx, QueueMap::kRoundRobin)),
        Config(EngineKind::kSync, 4, 2, 256, true, NotifyMode::kEventIdx,
               QueueMap::kThread),
        Config(EngineKind::kSync, 1, 1, 256, false, NotifyMode::kEventIdx),
        Config(EngineKind::kUring, 1, 1, 32, true, NotifyMode::kEventIdx),
        Config(EngineKind::kUring, 4, 2, 256, true, NotifyMode::kAlways,
               QueueMap::kRoundRobin),
        Config(EngineKind::kUring, 4, 1, 11, false, NotifyMode::kEventIdx),
        Config(EngineKind::kUring, 1, 1, 256, false, NotifyMode::kAlways),
        VirtioConfig(EngineKind::kSync, 1, 1, 64, 11, true,
                     NotifyMode::kEventIdx),
        VirtioConfig(EngineKind::kSync, 4, 1, 64, 256, true,
                     NotifyMode::kAlways, QueueMap::kThread),
        VirtioConfig(EngineKind::kSync, 1, 1, 1024, 256, false,
                     NotifyMode::kEventIdx),
        VirtioConfig(EngineKind::kUring, 4, 2, 1024, 256, false,
                     NotifyMode::kAlways, QueueMap::kRoundRobin),
        VirtioConfig(EngineKind::kUring, 1, 1, 1024, 11, false,
                     NotifyMode::kEventIdx),
        VirtioConfig(EngineKind::kUring, 4, 1, 64, 11, true,
                     NotifyMode::kEventIdx),
        WithIrqThread(VirtioConfig(EngineKind::kUring, 4, 1, 256, 256, true,
                                   NotifyMode::kEventIdx)),
        Packed(VirtioConfig(EngineKind::kSync, 1, 1, 32, 11, true,
                            NotifyMode::kEventIdx)),
        Packed(VirtioConfig(EngineKind::kSync, 4, 1, 64, 256, false,
                            NotifyMode::kAlways, QueueMap::kThread)),
        Packed(VirtioConfig(EngineKind::kUring, 4, 2, 1024, 256, false,
                            NotifyMode::kAlways, QueueMap::kRoundRobin)),
        Packed(VirtioConfig(EngineKind::kUring, 1, 1, 1024, 11, true,
                            NotifyMode::kEventIdx)),
        WithIrqThread(Packed(VirtioConfig(EngineKind::kUring, 4, 1, 256, 256,
                                          true, NotifyMode::kEventIdx))),
        Sgl(Nvme(VirtioConfig(EngineKind::kSync, 4, 1, 64, 256, false,
                              NotifyMode::kAlways, QueueMap::kThread))),
        Coalesced(Nvme(VirtioConfig(EngineKind::kUring, 4, 2, 1024, 256, false,
                                    NotifyMode::kEventIdx,
                                    QueueMap::kRoundRobin))),
        WithIrqThread(Coalesced(Sgl(Nvme(VirtioConfig(
            EngineKind::kUring, 4, 1, 256, 600, true, NotifyMode::kAlways)))))),
    ConfigName);

}  // namespace
}  // namespace pvdisk::transport
