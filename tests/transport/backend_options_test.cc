// BackendOptions end to end: the engine in-flight cap
// (--engine-max-inflight) and polling before sleeping (--poll-us).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "stats/counters.h"
#include "transport/block_io.h"
#include "transport/queue.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Bytes;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;
using testing::Waiter;

std::string EngineName(const ::testing::TestParamInfo<io::EngineKind>& info) {
  return std::string(io::EngineKindName(info.param));
}

class BackendOptionsTest
    : public testing::TransportFixture,
      public ::testing::WithParamInterface<io::EngineKind> {
 protected:
  // Writes `count` 4 KiB blocks of a pattern from sector 0, then reads them
  // back with `count` concurrent 4 KiB BlockIos and checks every one.
  void ConcurrentReads(int count, uint32_t seed) {
    const uint64_t sectors = uint64_t{8} * count;
    const std::string data = Pattern(0, sectors, seed);
    for (uint64_t first = 0; first < sectors; first += 2048) {
      const uint64_t n = std::min<uint64_t>(2048, sectors - first);
      const std::string part = data.substr(first * 512, n * 512);
      ASSERT_EQ(Run(BlockOp::kWrite, first, n, &part)->result, 0);
    }
    Waiter* waiter = NewWaiter();
    std::vector<TestIo*> reads;
    for (int i = 0; i < count; ++i) {
      reads.push_back(
          NewIo(waiter, BlockOp::kRead, uint64_t{8} * i, 8, nullptr));
    }
    std::thread other([&] {
      for (int i = 1; i < count; i += 2) Submit(reads[i]);
    });
    for (int i = 0; i < count; i += 2) Submit(reads[i]);
    other.join();
    Wait(waiter, count);
    if (hung_) return;
    for (TestIo* read : reads) {
      ASSERT_EQ(read->result, 0) << read->sector;
      ASSERT_EQ(read->calls, 1);
      ASSERT_TRUE(read->read_data ==
                  data.substr(read->sector * 512, read->num_sectors * 512))
          << "read of sector " << read->sector;
    }
  }

  uint64_t MaxEngineInflight() {
    uint64_t most = 0;
    for (size_t q = 0; q < transport_->queue_count(); ++q) {
      most = std::max(most, GetQueue(q, Counter::engine_inflight_max));
    }
    return most;
  }
};

TEST_P(BackendOptionsTest, EngineCapLimitsIosInFlight) {
  TransportConfig config;
  config.engine = GetParam();
  config.queues = 2;  // one backend thread, one engine, two rings
  config.queue_map = QueueMap::kRoundRobin;
  config.backend.engine_max_inflight = 8;
  StartTransport(config);
  if (!transport_) return;
  for (int round = 0; round < 3 && !HasFatalFailure(); ++round) {
    ConcurrentReads(200, 30 + round);
  }
  if (hung_ || HasFatalFailure()) return;
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    const uint64_t most = GetQueue(q, Counter::engine_inflight_max);
    EXPECT_LE(most, 8u) << "queue " << q;
    EXPECT_GE(most, 1u) << "queue " << q;
    EXPECT_EQ(GetQueue(q, Counter::inflight), 0u);
    EXPECT_EQ(GetQueue(q, Counter::errors), 0u);
  }
  EXPECT_GE(Get(Counter::reqs_read), 600u);
}

TEST_P(BackendOptionsTest, WithoutCapTheRingsSetTheLimit) {
  TransportConfig config;
  config.engine = GetParam();
  config.ring_size = 256;
  StartTransport(config);
  if (!transport_) return;
  // Bursts of 200 concurrent BlockIos: the backend takes what the ring
  // holds before it runs the engine, so far more than 8 are in flight.
  for (int round = 0; round < 5 && MaxEngineInflight() <= 8; ++round) {
    ConcurrentReads(200, 40 + round);
    if (hung_ || HasFatalFailure()) return;
  }
  std::printf("engine_inflight_max without a cap: %llu\n",
              static_cast<unsigned long long>(MaxEngineInflight()));
  EXPECT_GT(MaxEngineInflight(), 8u);
  EXPECT_LE(MaxEngineInflight(), 256u);
}

// A steady stream of requests, each submitted as soon as the previous one
// completed, by one thread in a tight loop: the backend's poll finds most of
// them before it goes to sleep.
TEST_P(BackendOptionsTest, PollingServesASteadyStream) {
  TransportConfig config;
  config.engine = GetParam();
  config.backend.poll_us = 200;
  StartTransport(config);
  if (!transport_) return;
  constexpr int kRequests = 400;
  const std::string data = Pattern(0, uint64_t{8} * kRequests, 50);
  std::atomic<bool> ok{true};
  std::thread submitter([&] {
    for (int i = 0; i < kRequests && ok; ++i) {
      Waiter* waiter = NewWaiter();
      TestIo* io = NewIo(waiter, BlockOp::kWrite, uint64_t{8} * i, 8,
                         Bytes(data) + i * 4096);
      Submit(io);
      if (!waiter->WaitFor(1, testing::kTimeout) || io->result != 0) {
        ok = false;
      }
    }
  });
  submitter.join();
  ASSERT_TRUE(ok) << "a write failed or did not complete";
  const std::string image = ReadImage(0, uint64_t{8} * kRequests);
  EXPECT_TRUE(image == data) << "image differs";
  for (int i = 0; i < 50; ++i) {
    TestIo* read = Run(BlockOp::kRead, uint64_t{8} * i * 7, 8);
    ASSERT_EQ(read->result, 0);
    ASSERT_TRUE(read->read_data == data.substr(i * 7 * 4096, 4096));
  }
  std::printf("polls_hit: %llu of %d requests\n",
              static_cast<unsigned long long>(Get(Counter::polls_hit)),
              kRequests + 50);
  EXPECT_GT(Get(Counter::polls_hit), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_EQ(Get(Counter::errors), 0u);
}

// Polling is there to cut latency: while the backend spins for new work, an
// I/O it already took must still be carried out and answered. BackendLoop's
// Poll() is documented to spin "for a request or a completion"; an I/O
// waiting for the poll to end would take at least poll_us.
TEST_P(BackendOptionsTest, PollingDoesNotDelayRequestsAlreadyTaken) {
  TransportConfig config;
  config.engine = GetParam();
  config.backend.poll_us = 50'000;  // 50 ms: far longer than a 4 KiB I/O
  StartTransport(config);
  if (!transport_) return;
  const std::string data = Pattern(0, 8, 51);
  ASSERT_EQ(Run(BlockOp::kWrite, 0, 8, &data)->result, 0);
  std::vector<double> latencies_ms;
  for (int i = 0; i < 9; ++i) {
    const auto start = std::chrono::steady_clock::now();
    TestIo* read = Run(BlockOp::kRead, 0, 8);
    if (hung_) return;
    latencies_ms.push_back(std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - start)
                               .count());
    ASSERT_EQ(read->result, 0);
    ASSERT_EQ(read->read_data, data);
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  const double median = latencies_ms[latencies_ms.size() / 2];
  EXPECT_LT(median, 25.0) << "a lone 4 KiB read took " << median
                          << " ms (median) with --poll-us 50000: it waited "
                             "for the poll to end";
}

INSTANTIATE_TEST_SUITE_P(Engines, BackendOptionsTest,
                         ::testing::Values(io::EngineKind::kSync,
                                           io::EngineKind::kUring),
                         EngineName);

}  // namespace
}  // namespace pvdisk::transport
