// Transport's control side: option checks, queue map names, and which queue
// QueueFor() picks under each QueueMap policy.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/queue.h"
#include "transport/transport.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using testing::TransportConfig;

constexpr uint64_t kStripe = 2048;  // sectors: 1 MiB

TEST(TransportOptionsTest, QueueAndThreadCounts) {
  TransportOptions options;
  options.queues = 1;
  options.backend_threads = 1;
  EXPECT_TRUE(ValidateTransportOptions(options).ok());
  options.queues = kMaxQueues;
  options.backend_threads = kMaxQueues;
  EXPECT_TRUE(ValidateTransportOptions(options).ok());
  options.queues = 0;
  options.backend_threads = 1;
  EXPECT_NE(ValidateTransportOptions(options).message().find("--queues"),
            absl::string_view::npos);
  options.queues = kMaxQueues + 1;
  EXPECT_FALSE(ValidateTransportOptions(options).ok());
  options.queues = 4;
  options.backend_threads = 0;
  EXPECT_NE(
      ValidateTransportOptions(options).message().find("--backend-threads"),
      absl::string_view::npos);
  options.backend_threads = 5;  // more threads than queues
  EXPECT_FALSE(ValidateTransportOptions(options).ok());
  options.backend_threads = 4;
  options.queue.max_segments = 5;  // the queue options are checked too
  EXPECT_FALSE(ValidateTransportOptions(options).ok());
}

TEST(TransportOptionsTest, CreateRefusesBadOptionsWithoutMakingEngines) {
  TransportOptions options;
  options.queues = 0;
  int engines = 0;
  auto transport = Transport::Create(
      options,
      [&](uint32_t,
          io::RingLender*) -> absl::StatusOr<std::unique_ptr<io::IoEngine>> {
        ++engines;
        return absl::InternalError("not expected");
      });
  EXPECT_TRUE(absl::IsInvalidArgument(transport.status()));
  EXPECT_EQ(engines, 0);
}

TEST(QueueMapTest, ParseAndName) {
  for (QueueMap map :
       {QueueMap::kThread, QueueMap::kOffset, QueueMap::kRoundRobin}) {
    auto parsed = ParseQueueMap(QueueMapName(map));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, map);
  }
  EXPECT_EQ(QueueMapName(QueueMap::kRoundRobin), "round-robin");
  auto bad = ParseQueueMap("random");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("random"), absl::string_view::npos);
  EXPECT_FALSE(ParseQueueMap("").ok());
  EXPECT_FALSE(ParseQueueMap("Offset").ok());
}

// Transports over the null engine, never started: QueueFor() only.
class QueueForTest : public testing::TransportFixture {
 protected:
  void Build(uint32_t queues, QueueMap map) {
    TransportConfig config;
    config.engine = io::EngineKind::kNull;
    config.queues = queues;
    config.queue_map = map;
    config.ring_size = kMinRingSize;
    StartTransport(config, /*start=*/false);
  }

  // The index of the queue QueueFor(sector) picks.
  size_t IndexFor(uint64_t sector) {
    Queue* queue = &transport_->QueueFor(sector);
    for (size_t q = 0; q < transport_->queue_count(); ++q) {
      if (&transport_->queue(q) == queue) return q;
    }
    ADD_FAILURE() << "QueueFor returned no queue of this transport";
    return SIZE_MAX;
  }
};

TEST_F(QueueForTest, OffsetMapsOneMebibyteStripesToConsecutiveQueues) {
  Build(4, QueueMap::kOffset);
  ASSERT_TRUE(transport_);
  for (uint64_t stripe = 0; stripe < 40; ++stripe) {
    const size_t expected = stripe % 4;
    const uint64_t first = stripe * kStripe;
    // The whole stripe goes to one queue...
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{7},
                            uint64_t{1024}, kStripe - 8, kStripe - 1}) {
      ASSERT_EQ(IndexFor(first + offset), expected)
          << "sector " << first + offset;
    }
    // ...and the next stripe to the next queue.
    ASSERT_EQ(IndexFor(first + kStripe), (expected + 1) % 4);
  }
  // Far out on a large disk too.
  EXPECT_EQ(IndexFor(uint64_t{1} << 40), ((uint64_t{1} << 40) / kStripe) % 4);
  // Asking does not change the answer.
  EXPECT_EQ(IndexFor(5 * kStripe), 1u);
  EXPECT_EQ(IndexFor(5 * kStripe), 1u);
}

TEST_F(QueueForTest, OffsetWithThreeQueues) {
  Build(3, QueueMap::kOffset);
  ASSERT_TRUE(transport_);
  std::vector<size_t> seen;
  for (uint64_t stripe = 0; stripe < 6; ++stripe) {
    seen.push_back(IndexFor(stripe * kStripe + 100));
  }
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST_F(QueueForTest, RoundRobinCyclesThroughAllQueues) {
  Build(4, QueueMap::kRoundRobin);
  ASSERT_TRUE(transport_);
  const size_t start = IndexFor(0);
  for (size_t i = 1; i <= 40; ++i) {
    // Regardless of the sector: the same sector goes to the next queue.
    ASSERT_EQ(IndexFor(0), (start + i) % 4) << i;
  }
  std::map<size_t, int> counts;
  for (int i = 0; i < 400; ++i) ++counts[IndexFor(i * 8)];
  ASSERT_EQ(counts.size(), 4u);
  for (const auto& [queue, count] : counts) EXPECT_EQ(count, 100) << queue;
}

TEST_F(QueueForTest, ThreadMapGivesEachThreadAStableQueue) {
  Build(4, QueueMap::kThread);
  ASSERT_TRUE(transport_);
  constexpr int kThreads = 8;
  std::vector<size_t> first(kThreads);
  std::vector<bool> stable(kThreads, true);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      first[t] = IndexFor(0);
      for (uint64_t i = 1; i < 1000; ++i) {
        // Any sector: the thread's queue.
        if (IndexFor(i * 977) != first[t]) stable[t] = false;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::map<size_t, int> per_queue;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(stable[t]) << "thread " << t << " moved between queues";
    ASSERT_LT(first[t], 4u);
    ++per_queue[first[t]];
  }
  // Threads are dealt out round-robin on first use: 8 threads, 2 per queue.
  EXPECT_EQ(per_queue.size(), 4u);
  for (const auto& [queue, count] : per_queue) EXPECT_EQ(count, 2) << queue;
}

TEST_F(QueueForTest, OneQueueTakesEverything) {
  for (QueueMap map :
       {QueueMap::kThread, QueueMap::kOffset, QueueMap::kRoundRobin}) {
    transport_.reset();
    image_.reset();
    Build(1, map);
    ASSERT_TRUE(transport_);
    for (uint64_t sector : {uint64_t{0}, kStripe, 7 * kStripe + 3}) {
      EXPECT_EQ(IndexFor(sector), 0u);
    }
  }
}

TEST_F(QueueForTest, QueuesAreNamedAndSizedAlike) {
  Build(4, QueueMap::kOffset);
  ASSERT_TRUE(transport_);
  EXPECT_EQ(transport_->options().queues, 4u);
  for (size_t q = 0; q < 4; ++q) {
    EXPECT_EQ(transport_->queue(q).pool_pages(),
              transport_->queue(0).pool_pages());
    EXPECT_GE(transport_->queue(q).pool_pages(), 2048u);
    // Persistent grants: the pool is offered to the engine.
    iovec pool = transport_->queue(q).PoolBuffer();
    EXPECT_EQ(pool.iov_len, transport_->queue(q).pool_pages() * 4096u);
  }
  EXPECT_FALSE(transport_->uses_fixed_buffers());  // null engine
}

}  // namespace
}  // namespace pvdisk::transport
