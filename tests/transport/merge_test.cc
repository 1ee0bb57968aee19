// The staging queue of FrontendQueue: merging, dispatch policies, plugging
// and the completion of merged ring requests.
//
// The rule tests drive a real FrontendQueue over FakeRing, a DriverRing test
// double that says how much room it has, records every request written to it
// and answers requests only when the test says so. While it reports "full",
// submitted requests stay in the staging queue and merge deterministically;
// opening it and signalling the interrupt eventfd lets the completion thread
// dispatch them. The last tests run a real Transport (both engines, both
// ring protocols) with many concurrent adjacent writes.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/functional/function_ref.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "stats/counters.h"
#include "stats/queue_stats.h"
#include "transport/blkif/protocol.h"
#include "transport/block_io.h"
#include "transport/driver_ring.h"
#include "transport/event_fd.h"
#include "transport/frontend_queue.h"
#include "transport/nvme/protocol.h"
#include "transport/protocol.h"
#include "transport/ring_request.h"
#include "transport/virtio/protocol.h"
#include "transport/virtio_packed/protocol.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Bytes;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;
using testing::Waiter;
using namespace std::chrono_literals;

constexpr auto kWaitLimit = 5s;

// A ring request as FakeRing saw it.
struct Written {
  BlockOp op;
  uint64_t id;
  uint64_t sector;
  uint64_t num_sectors;
  std::vector<DataSegment> segments;
};

// A DriverRing whose room, contents and responses the test controls. The
// queue calls it under its lock from the submitting and the completion
// threads; the test calls it from its own thread.
class FakeRing final : public DriverRing {
 public:
  explicit FakeRing(uint32_t room) : room_(room) {}

  // --- Test side ---

  uint64_t MaxRangeSectors(BlockOp) const override { return UINT64_MAX; }

  // How many more requests Write() may take (the ring's free slots).
  void SetRoom(uint32_t room) {
    std::lock_guard<std::mutex> lock(mu_);
    room_ = room;
  }
  // Queues a response; the queue sees it on its next ConsumeResponses().
  void Answer(uint64_t id, int result) {
    std::lock_guard<std::mutex> lock(mu_);
    responses_.push_back({id, result});
  }
  std::vector<Written> written() {
    std::lock_guard<std::mutex> lock(mu_);
    return written_;
  }
  // Requests written per Publish() call, including calls with none.
  std::vector<uint32_t> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  size_t publish_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_.size();
  }
  uint64_t consume_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return consume_calls_;
  }
  bool overfilled() {
    std::lock_guard<std::mutex> lock(mu_);
    return overfilled_;
  }
  // Waits until `count` requests were written and published.
  bool WaitForPublished(size_t count,
                        std::chrono::milliseconds limit = kWaitLimit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return published_ >= count; });
  }
  // Waits until Publish() was called more than `calls` times.
  bool WaitForPublishCalls(size_t calls,
                           std::chrono::milliseconds limit = kWaitLimit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return batches_.size() > calls; });
  }

  // --- DriverRing ---

  uint32_t FreeSlots() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return room_;
  }
  void Write(const RingRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (room_ == 0) {
      overfilled_ = true;  // REQUIRES HasRoomFor() broken
    } else {
      --room_;
    }
    written_.push_back(Written{
        request.op, request.id, request.sector, request.num_sectors,
        std::vector<DataSegment>(request.segments,
                                 request.segments + request.segment_count)});
    ++unpublished_;
  }
  PushResult Publish() override {
    std::lock_guard<std::mutex> lock(mu_);
    batches_.push_back(unpublished_);
    published_ += unpublished_;
    bool any = unpublished_ > 0;
    unpublished_ = 0;
    cv_.notify_all();
    return any ? PushResult::kNotify : PushResult::kNothing;
  }
  int ConsumeResponses(
      absl::FunctionRef<void(uint64_t id, int result)> on_response) override {
    std::vector<Response> responses;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++consume_calls_;
      responses.swap(responses_);
    }
    for (const Response& response : responses) {
      on_response(response.id, response.result);
    }
    return static_cast<int>(responses.size());
  }
  bool FinalCheckForResponses() override {
    std::lock_guard<std::mutex> lock(mu_);
    return !responses_.empty();
  }

 private:
  struct Response {
    uint64_t id;
    int result;
  };

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint32_t room_;
  std::vector<Written> written_;
  uint32_t unpublished_ = 0;
  size_t published_ = 0;
  std::vector<uint32_t> batches_;
  std::vector<Response> responses_;
  uint64_t consume_calls_ = 0;
  bool overfilled_ = false;
};

// Sectors carried by a recorded request's segments.
uint64_t SegmentSectors(const Written& request) {
  uint64_t sectors = 0;
  for (const DataSegment& s : request.segments) {
    sectors += s.last_sector - s.first_sector + 1u;
  }
  return sectors;
}

// A FrontendQueue over a FakeRing, with 32 request ids, 11 segments per
// request and a 256-page pool, unless a test asks otherwise.
class MergeQueueTest : public ::testing::Test {
 protected:
  static FrontendLayout DefaultLayout() {
    FrontendLayout layout;
    layout.ring_slots = 32;
    layout.max_segments = 11;
    layout.pool_pages = 256;
    layout.table_pages_per_request = 0;
    return layout;
  }

  // Builds and starts the queue; the ring takes `room` requests at first.
  void Build(const QueuePolicy& policy, uint32_t room,
             const FrontendLayout& layout = DefaultLayout()) {
    auto kick = EventFd::Create();
    auto irq = EventFd::Create();
    ASSERT_TRUE(kick.ok() && irq.ok());
    parts_->kick = std::move(*kick);
    parts_->irq = std::move(*irq);
    parts_->memory.assign(size_t{layout.pool_pages} * kPageSize, 0);
    auto ring = std::make_unique<FakeRing>(room);
    ring_ = ring.get();
    parts_->queue = std::make_unique<FrontendQueue>(
        std::move(ring), parts_->memory.data(), layout, policy,
        parts_->kick.get(), parts_->irq.get(), &parts_->stats);
    parts_->queue->Start();
  }

  void TearDown() override {
    if (!parts_->queue) return;
    // Answer everything still on the ring, let the rest in, until every
    // BlockIo has completed; only then can the queue stop.
    size_t answered = 0;
    auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
    while (waiter_->done() < submitted_ &&
           std::chrono::steady_clock::now() < deadline) {
      ring_->SetRoom(1000);
      std::vector<Written> written = ring_->written();
      for (; answered < written.size(); ++answered) {
        if (!Answered(answered)) {
          ring_->Answer(written[answered].id, 0);
        }
      }
      Irq();
      std::this_thread::sleep_for(1ms);
    }
    if (waiter_->done() < submitted_) {
      ADD_FAILURE() << "only " << waiter_->done() << " of " << submitted_
                    << " BlockIos completed; leaking the queue";
      // Its thread may still use all of it.
      (void)parts_.release();
      (void)ios_.release();
      (void)waiter_.release();
      return;
    }
    EXPECT_FALSE(ring_->overfilled()) << "wrote to a ring without room";
    parts_->queue->Drain();
    parts_->queue->Stop();
  }

  // Whether the test already answered recorded request `index`.
  bool Answered(size_t index) const {
    return index < answered_by_test_.size() && answered_by_test_[index];
  }

  // Answers recorded request `index`, then interrupts the queue.
  void AnswerRequest(size_t index, int result) {
    std::vector<Written> written = ring_->written();
    ASSERT_LT(index, written.size());
    if (answered_by_test_.size() <= index) {
      answered_by_test_.resize(index + 1, false);
    }
    answered_by_test_[index] = true;
    ring_->Answer(written[index].id, result);
    Irq();
  }

  void Irq() { parts_->irq->Signal(); }

  // Opens the ring to `room` requests and interrupts the queue until
  // `expect` requests were published in all: each interrupt is one dispatch,
  // which moves only one request while the ring counts as busy.
  void OpenRing(size_t expect, uint32_t room = 32) {
    ring_->SetRoom(room);
    auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
    while (ring_->written().size() < expect &&
           std::chrono::steady_clock::now() < deadline) {
      size_t calls = ring_->publish_calls();
      Irq();
      ring_->WaitForPublishCalls(calls, 100ms);
    }
    ASSERT_TRUE(ring_->WaitForPublished(expect, 0ms))
        << "only " << ring_->written().size() << " of " << expect
        << " requests reached the ring";
  }

  TestIo* Submit(BlockOp op, uint64_t sector, uint64_t sectors) {
    ios_->push_back(
        std::make_unique<TestIo>(waiter_.get(), op, sector, sectors, nullptr));
    TestIo* io = ios_->back().get();
    std::string data;
    if (op == BlockOp::kWrite) {
      data = Pattern(sector, sectors, 7);
      io->write_data = Bytes(data);
    }
    ++submitted_;
    parts_->queue->Submit(io);
    // The data had to stay valid only until Submit() returned.
    std::fill(data.begin(), data.end(), '\xEE');
    return io;
  }
  TestIo* Write(uint64_t sector, uint64_t sectors) {
    return Submit(BlockOp::kWrite, sector, sectors);
  }
  TestIo* Read(uint64_t sector, uint64_t sectors) {
    return Submit(BlockOp::kRead, sector, sectors);
  }

  // The bytes a recorded request's segments hold in the data pages.
  std::string SegmentBytes(const Written& request) {
    std::string bytes;
    for (const DataSegment& s : request.segments) {
      const uint8_t* at = parts_->memory.data() + size_t{s.page} * kPageSize +
                          size_t{s.first_sector} * kSectorSize;
      bytes.append(reinterpret_cast<const char*>(at),
                   size_t{s.last_sector - s.first_sector + 1u} * kSectorSize);
    }
    return bytes;
  }
  // Plays the backend of a read: puts the disk's bytes into its segments.
  void FillSegments(const Written& request, uint32_t seed) {
    std::string bytes = Pattern(request.sector, request.num_sectors, seed);
    size_t offset = 0;
    for (const DataSegment& s : request.segments) {
      size_t length = size_t{s.last_sector - s.first_sector + 1u} * 512;
      std::memcpy(parts_->memory.data() + size_t{s.page} * kPageSize +
                      size_t{s.first_sector} * kSectorSize,
                  bytes.data() + offset, length);
      offset += length;
    }
  }

  bool WaitAll() {
    bool ok = waiter_->WaitFor(submitted_, std::chrono::seconds(5));
    EXPECT_TRUE(ok) << "only " << waiter_->done() << " of " << submitted_
                    << " BlockIos completed";
    return ok;
  }
  uint64_t Get(Counter c) { return parts_->stats.Snapshot().Get(c); }

  // Expects exactly one recorded request for each (sector, sectors) pair,
  // in this order, of operation `op` (for data requests, with the segments
  // summing up to the length).
  void ExpectRequests(
      BlockOp op, const std::vector<std::pair<uint64_t, uint64_t>>& expected) {
    std::vector<Written> written = ring_->written();
    ASSERT_EQ(written.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(written[i].op, op) << "request " << i;
      EXPECT_EQ(written[i].sector, expected[i].first) << "request " << i;
      EXPECT_EQ(written[i].num_sectors, expected[i].second) << "request " << i;
      if (op == BlockOp::kRead || op == BlockOp::kWrite) {
        EXPECT_EQ(SegmentSectors(written[i]), written[i].num_sectors)
            << "request " << i;
      }
    }
  }

  struct Parts {
    std::unique_ptr<EventFd> kick;
    std::unique_ptr<EventFd> irq;
    std::vector<uint8_t> memory;
    stats::QueueStats stats;
    std::unique_ptr<FrontendQueue> queue;  // last: goes first
  };
  std::unique_ptr<Parts> parts_ = std::make_unique<Parts>();
  FakeRing* ring_ = nullptr;  // owned by the queue
  std::unique_ptr<Waiter> waiter_ = std::make_unique<Waiter>();
  int submitted_ = 0;
  std::vector<bool> answered_by_test_;
  std::unique_ptr<std::vector<std::unique_ptr<TestIo>>> ios_ =
      std::make_unique<std::vector<std::unique_ptr<TestIo>>>();
};

QueuePolicy MergePolicy() { return QueuePolicy{}; }

// --- Which requests merge ---

TEST_F(MergeQueueTest, BackMergeMakesOneRequestWithSegmentsInOrder) {
  Build(MergePolicy(), /*room=*/0);
  TestIo* a = Write(0, 8);
  TestIo* b = Write(8, 16);  // starts where `a` ends
  EXPECT_EQ(Get(Counter::merges_write), 1u);
  EXPECT_EQ(Get(Counter::ring_full), 2u);
  EXPECT_TRUE(ring_->written().empty());

  OpenRing(1);
  ExpectRequests(BlockOp::kWrite, {{0, 24}});
  Written merged = ring_->written()[0];
  ASSERT_EQ(merged.segments.size(), 3u);
  // a's page, then b's two pages, each holding its own data.
  EXPECT_TRUE(SegmentBytes(merged) == Pattern(0, 24, 7)) << "data differs";

  AnswerRequest(0, 0);
  ASSERT_TRUE(WaitAll());
  EXPECT_EQ(a->result, 0);
  EXPECT_EQ(b->result, 0);
  EXPECT_EQ(a->calls, 1);
  EXPECT_EQ(b->calls, 1);
  EXPECT_EQ(Get(Counter::merges_read), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

TEST_F(MergeQueueTest, FrontMergeStartsAtTheEarlierRequest) {
  Build(MergePolicy(), /*room=*/0);
  TestIo* b = Write(16, 8);
  TestIo* a = Write(5, 11);  // ends where `b` starts; partial last page
  EXPECT_EQ(Get(Counter::merges_write), 1u);

  OpenRing(1);
  ExpectRequests(BlockOp::kWrite, {{5, 19}});
  Written merged = ring_->written()[0];
  ASSERT_EQ(merged.segments.size(), 3u);
  EXPECT_EQ(merged.segments[0].first_sector, 0);
  EXPECT_EQ(merged.segments[0].last_sector, 7);
  EXPECT_EQ(merged.segments[1].first_sector, 0);
  EXPECT_EQ(merged.segments[1].last_sector, 2);  // a's partial page
  EXPECT_EQ(merged.segments[2].last_sector, 7);  // then b's page
  EXPECT_TRUE(SegmentBytes(merged) == Pattern(5, 19, 7)) << "data differs";

  AnswerRequest(0, 0);
  ASSERT_TRUE(WaitAll());
  EXPECT_EQ(a->result, 0);
  EXPECT_EQ(b->result, 0);
}

TEST_F(MergeQueueTest, ChainOfMergesCountsEachMergedRequest) {
  Build(MergePolicy(), /*room=*/0);
  // Writes 0..40 in the order 2, 3, 1, 4, 0 (back and front merges), reads
  // 100..124 in order.
  for (uint64_t i : {2, 3, 1, 4, 0}) Write(8 * i, 8);
  for (uint64_t i : {0, 1, 2}) Read(100 + 8 * i, 8);
  EXPECT_EQ(Get(Counter::merges_write), 4u);
  EXPECT_EQ(Get(Counter::merges_read), 2u);

  OpenRing(2);
  std::vector<Written> written = ring_->written();
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0].op, BlockOp::kWrite);
  EXPECT_EQ(written[0].sector, 0u);
  EXPECT_EQ(written[0].num_sectors, 40u);
  EXPECT_EQ(written[0].segments.size(), 5u);
  EXPECT_TRUE(SegmentBytes(written[0]) == Pattern(0, 40, 7));
  EXPECT_EQ(written[1].op, BlockOp::kRead);
  EXPECT_EQ(written[1].sector, 100u);
  EXPECT_EQ(written[1].num_sectors, 24u);
  AnswerRequest(0, 0);
  FillSegments(written[1], 9);
  AnswerRequest(1, 0);
  ASSERT_TRUE(WaitAll());
}

TEST_F(MergeQueueTest, MergedReadsEachGetTheirOwnData) {
  Build(MergePolicy(), /*room=*/0);
  TestIo* r0 = Read(40, 8);
  TestIo* r1 = Read(48, 3);
  TestIo* r2 = Read(51, 21);  // 3 pages, the last partial
  TestIo* r3 = Read(32, 8);   // front merge
  EXPECT_EQ(Get(Counter::merges_read), 3u);
  EXPECT_EQ(Get(Counter::merges_write), 0u);

  OpenRing(1);
  ExpectRequests(BlockOp::kRead, {{32, 40}});
  EXPECT_EQ(ring_->written()[0].segments.size(), 6u);
  FillSegments(ring_->written()[0], 3);
  AnswerRequest(0, 0);
  ASSERT_TRUE(WaitAll());
  for (TestIo* io : {r0, r1, r2, r3}) {
    EXPECT_EQ(io->result, 0);
    EXPECT_EQ(io->calls, 1);
    EXPECT_TRUE(io->read_data == Pattern(io->sector, io->num_sectors, 3))
        << "read at sector " << io->sector << " got other bytes";
  }
}

TEST_F(MergeQueueTest, ReadAndWriteDoNotMerge) {
  Build(MergePolicy(), /*room=*/0);
  Write(0, 8);
  Read(8, 8);    // after the write
  Write(16, 8);  // after the read, not after a write
  Read(24, 8);
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  EXPECT_EQ(Get(Counter::merges_read), 0u);
  OpenRing(4);
  std::vector<Written> written = ring_->written();
  ASSERT_EQ(written.size(), 4u);
  EXPECT_EQ(written[0].op, BlockOp::kWrite);
  EXPECT_EQ(written[1].op, BlockOp::kRead);
  EXPECT_EQ(written[2].op, BlockOp::kWrite);
  EXPECT_EQ(written[3].op, BlockOp::kRead);
}

TEST_F(MergeQueueTest, GapsAndOverlapsDoNotMerge) {
  Build(MergePolicy(), /*room=*/0);
  Write(0, 8);
  Write(9, 8);   // one sector after
  Write(4, 8);   // overlaps the first
  Write(40, 8);  // far away
  Write(30, 9);  // ends at 39: one sector before 40
  Write(20, 9);  // ends at 29: one sector before 30
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  OpenRing(6);
  ExpectRequests(BlockOp::kWrite,
                 {{0, 8}, {9, 8}, {4, 8}, {40, 8}, {30, 9}, {20, 9}});
}

TEST_F(MergeQueueTest, FlushAndDiscardNeverMerge) {
  Build(MergePolicy(), /*room=*/0);
  Write(0, 8);
  Submit(BlockOp::kDiscard, 8, 8);       // adjacent to the write before
  Write(16, 8);                          // adjacent to the discard
  Submit(BlockOp::kWriteZeroes, 24, 8);  // adjacent to the write before
  Submit(BlockOp::kDiscard, 32, 8);      // adjacent to the write-zeroes
  Submit(BlockOp::kDiscard, 40, 8);      // adjacent to the discard
  Submit(BlockOp::kFlush, 0, 0);
  Submit(BlockOp::kFlush, 0, 0);
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  EXPECT_EQ(Get(Counter::merges_read), 0u);

  OpenRing(8);
  std::vector<Written> written = ring_->written();
  ASSERT_EQ(written.size(), 8u);
  const BlockOp ops[] = {BlockOp::kWrite,   BlockOp::kDiscard,
                         BlockOp::kWrite,   BlockOp::kWriteZeroes,
                         BlockOp::kDiscard, BlockOp::kDiscard,
                         BlockOp::kFlush,   BlockOp::kFlush};
  const uint64_t sectors[] = {0, 8, 16, 24, 32, 40};
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(written[i].op, ops[i]) << "request " << i;
    if (i < std::size(sectors)) {
      EXPECT_EQ(written[i].sector, sectors[i]) << "request " << i;
      EXPECT_EQ(written[i].num_sectors, 8u) << "request " << i;
    }
  }
  EXPECT_TRUE(written[1].segments.empty());
  EXPECT_TRUE(written[6].segments.empty());
  for (size_t i = 0; i < written.size(); ++i) AnswerRequest(i, 0);
  ASSERT_TRUE(WaitAll());
}

TEST_F(MergeQueueTest, MergeStopsAtMaxSegments) {
  Build(MergePolicy(), /*room=*/0);
  // 10 + 2 pages would be 12 segments: separate.
  Write(0, 80);
  Write(80, 16);
  // 2 + 1: merges.
  Write(96, 8);
  // 10 + 1 pages: exactly max_segments, 88 sectors: merges.
  Write(200, 80);
  Write(280, 8);
  // A full request (11 pages, 88 sectors) takes not even one more sector,
  // in front or behind.
  Write(400, 88);
  Write(488, 1);
  Write(399, 1);
  // 10 pages plus one sector (11 segments, 81 sectors) and 7 sectors: 88
  // sectors would be allowed, 12 segments are not.
  Write(600, 81);
  Write(681, 7);
  EXPECT_EQ(Get(Counter::merges_write), 2u);

  OpenRing(8);
  ExpectRequests(BlockOp::kWrite, {{0, 80},
                                   {80, 24},
                                   {200, 88},
                                   {400, 88},
                                   {488, 1},
                                   {399, 1},
                                   {600, 81},
                                   {681, 7}});
  std::vector<Written> written = ring_->written();
  EXPECT_EQ(written[2].segments.size(), 11u);
  for (const Written& w : written) {
    EXPECT_LE(w.segments.size(), 11u);
    EXPECT_LE(w.num_sectors, 88u);
    EXPECT_TRUE(SegmentBytes(w) == Pattern(w.sector, w.num_sectors, 7))
        << "data of the request at " << w.sector << " differs";
  }
}

TEST_F(MergeQueueTest, MergeLimitFollowsMaxSegments) {
  FrontendLayout layout = DefaultLayout();
  layout.max_segments = 16;
  Build(MergePolicy(), /*room=*/0, layout);
  // 16 one-page writes fill one request; the 17th starts a new one.
  for (uint64_t i = 0; i < 17; ++i) Write(8 * i, 8);
  EXPECT_EQ(Get(Counter::merges_write), 15u);
  OpenRing(2);
  ExpectRequests(BlockOp::kWrite, {{0, 128}, {128, 8}});
}

TEST_F(MergeQueueTest, LooksBackEightStagedRequests) {
  Build(MergePolicy(), /*room=*/0);
  // 7 unrelated requests between two adjacent ones: still found.
  Write(0, 8);
  for (uint64_t i = 0; i < 7; ++i) Write(1000 + 16 * i, 8);
  Write(8, 8);
  EXPECT_EQ(Get(Counter::merges_write), 1u);
  // 8 unrelated requests between: too far back.
  Write(5000, 8);
  for (uint64_t i = 0; i < 8; ++i) Write(2000 + 16 * i, 8);
  Write(5008, 8);
  EXPECT_EQ(Get(Counter::merges_write), 1u);
  OpenRing(18);
  EXPECT_EQ(ring_->written()[0].num_sectors, 16u);
}

TEST_F(MergeQueueTest, SplitChildMergesWithTheNextBlockIo) {
  Build(MergePolicy(), /*room=*/0);
  // 12 pages: children of 11 pages and 1 page; the next write merges into
  // the 1-page child.
  TestIo* big = Write(0, 96);
  TestIo* next = Write(96, 8);
  EXPECT_EQ(Get(Counter::splits), 1u);
  EXPECT_EQ(Get(Counter::merges_write), 1u);
  OpenRing(2);
  ExpectRequests(BlockOp::kWrite, {{0, 88}, {88, 16}});

  // Answering the merged request completes `next` but not `big`, whose
  // first child is still on the ring.
  AnswerRequest(1, 0);
  ASSERT_TRUE(waiter_->WaitFor(1, std::chrono::seconds(5)));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(next->calls, 1);
  EXPECT_EQ(next->result, 0);
  EXPECT_EQ(big->calls, 0);
  AnswerRequest(0, 0);
  ASSERT_TRUE(WaitAll());
  EXPECT_EQ(big->calls, 1);
  EXPECT_EQ(big->result, 0);
}

// --- Policies ---

TEST_F(MergeQueueTest, MergeOffNeverMerges) {
  QueuePolicy policy;
  policy.merge = false;
  Build(policy, /*room=*/0);
  for (uint64_t i = 0; i < 4; ++i) Write(8 * i, 8);
  for (uint64_t i = 0; i < 3; ++i) Read(100 + 8 * i, 8);
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  EXPECT_EQ(Get(Counter::merges_read), 0u);
  EXPECT_EQ(Get(Counter::ring_full), 7u);
  OpenRing(7);
  EXPECT_EQ(ring_->written().size(), 7u);
}

TEST_F(MergeQueueTest, DispatchAlwaysNeverMergesEvenWhenTheRingIsFull) {
  QueuePolicy policy;
  policy.dispatch = DispatchMode::kAlways;
  Build(policy, /*room=*/0);
  for (uint64_t i = 0; i < 4; ++i) Write(8 * i, 8);
  Read(100, 8);
  Read(108, 8);
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  EXPECT_EQ(Get(Counter::merges_read), 0u);
  // Each Submit() tried the ring and was refused.
  EXPECT_GE(Get(Counter::dispatch_busy), 6u);
  EXPECT_TRUE(ring_->written().empty());

  OpenRing(6);
  std::vector<Written> written = ring_->written();
  ASSERT_EQ(written.size(), 6u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(written[i].sector, 8 * i);  // in submission order
    EXPECT_EQ(written[i].num_sectors, 8u);
  }
  EXPECT_EQ(written[4].sector, 100u);
  EXPECT_EQ(written[5].sector, 108u);
}

TEST_F(MergeQueueTest, DispatchAlwaysWaitsForRoomOneSlotAtATime) {
  QueuePolicy policy;
  policy.dispatch = DispatchMode::kAlways;
  Build(policy, /*room=*/2);
  for (uint64_t i = 0; i < 5; ++i) Write(8 * i, 8);
  EXPECT_EQ(ring_->written().size(), 2u);
  uint64_t busy = Get(Counter::dispatch_busy);
  EXPECT_EQ(busy, 3u);  // the 3 submits that found the ring full
  OpenRing(3, /*room=*/1);
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ring_->written().size(), 3u);
  OpenRing(5, /*room=*/2);
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  ExpectRequests(BlockOp::kWrite, {{0, 8}, {8, 8}, {16, 8}, {24, 8}, {32, 8}});
}

TEST_F(MergeQueueTest, WhenRoomDispatchesAtOnceWhileTheRingHasRoom) {
  Build(MergePolicy(), /*room=*/32);
  for (uint64_t i = 0; i < 4; ++i) Write(8 * i, 8);
  // Nothing waited, so nothing merged.
  EXPECT_EQ(ring_->written().size(), 4u);
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  EXPECT_EQ(Get(Counter::ring_full), 0u);
  EXPECT_EQ(Get(Counter::dispatch_busy), 0u);
  EXPECT_EQ(Get(Counter::plugs), 0u);
}

// After refusals the busy score makes each dispatch move one request; as it
// decays without refusals, one dispatch moves all that are left.
TEST_F(MergeQueueTest, BusyRingDispatchesOneRequestPerPump) {
  Build(MergePolicy(), /*room=*/0);
  constexpr uint32_t kRequests = 16;
  for (uint64_t i = 0; i < kRequests; ++i) Write(16 * i, 8);  // gaps
  EXPECT_EQ(Get(Counter::merges_write), 0u);
  EXPECT_GE(Get(Counter::dispatch_busy), kRequests);

  ring_->SetRoom(32);
  std::vector<uint32_t> moved;  // requests written per interrupt
  size_t total = 0;
  for (int step = 0; step < 20 && total < kRequests; ++step) {
    size_t calls = ring_->publish_calls();
    size_t before = ring_->written().size();
    Irq();
    ASSERT_TRUE(ring_->WaitForPublishCalls(calls));
    size_t after = ring_->written().size();
    moved.push_back(static_cast<uint32_t>(after - before));
    total = after;
  }
  ASSERT_EQ(total, kRequests);
  ASSERT_GE(moved.size(), 3u);
  // While busy: one at a time...
  EXPECT_EQ(moved[0], 1u);
  EXPECT_EQ(moved[1], 1u);
  // ...and, once the score decayed, the rest at once.
  EXPECT_GT(moved.back(), 1u);
  EXPECT_EQ(moved.back() + moved.size() - 1, kRequests);
  for (size_t i = 0; i + 1 < moved.size(); ++i) {
    EXPECT_EQ(moved[i], 1u) << "dispatch " << i;
  }
}

// --- Plugging ---

TEST_F(MergeQueueTest, PlugHoldsABurstAndDispatchesItByItself) {
  QueuePolicy policy;
  policy.plug_us = 50000;  // long enough that the test thread is in time
  Build(policy, /*room=*/32);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    const uint64_t base = 1000 * round;
    size_t before = ring_->written().size();
    auto start = std::chrono::steady_clock::now();
    Write(base, 8);
    Write(base + 8, 8);
    Write(base + 100, 8);  // not adjacent: its own request
    EXPECT_EQ(ring_->written().size(), before) << "the plug did not hold";
    // No further Submit(): the completion thread must wake by itself when
    // the plug expires (the second round starts with it asleep for good).
    ASSERT_TRUE(ring_->WaitForPublished(before + 2));
    auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, 45ms);
    std::vector<Written> written = ring_->written();
    ASSERT_EQ(written.size(), before + 2);
    EXPECT_EQ(written[before].sector, base);
    EXPECT_EQ(written[before].num_sectors, 16u);
    EXPECT_EQ(written[before + 1].sector, base + 100);
    AnswerRequest(before, 0);
    AnswerRequest(before + 1, 0);
    ASSERT_TRUE(WaitAll());
    // Let the completion thread go to sleep with nothing plugged.
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(Get(Counter::merges_write), 2u);
  EXPECT_GT(Get(Counter::plugs), 0u);
  EXPECT_EQ(Get(Counter::dispatch_busy), 0u);
}

// ring_full counts "requests that waited because the ring or pool was
// full"; with a plug and a ring with room, none did.
TEST_F(MergeQueueTest, PluggedMergeIsNotCountedAsRingFull) {
  QueuePolicy policy;
  policy.plug_us = 50000;
  Build(policy, /*room=*/32);
  Write(0, 8);
  Write(8, 8);
  ASSERT_TRUE(ring_->WaitForPublished(1));
  EXPECT_EQ(Get(Counter::merges_write), 1u);
  // plugs counts requests held back: both writes were.
  EXPECT_EQ(Get(Counter::plugs), 2u);
  EXPECT_EQ(Get(Counter::ring_full), 0u)
      << "a request merged into a plugged one counted as ring_full";
}

// While the ring is full, an expired plug cannot be dispatched: the
// completion thread should sleep until a response comes, not poll.
TEST_F(MergeQueueTest, ExpiredPlugOnAFullRingDoesNotSpin) {
  QueuePolicy policy;
  policy.plug_us = 1000;
  Build(policy, /*room=*/0);
  Write(0, 8);
  std::this_thread::sleep_for(10ms);  // the plug expires
  uint64_t before = ring_->consume_calls();
  std::this_thread::sleep_for(100ms);
  uint64_t wakeups = ring_->consume_calls() - before;
  EXPECT_LE(wakeups, 10u) << "the completion thread woke " << wakeups
                          << " times in 100 ms with nothing to do";
  OpenRing(1);
}

// --- Completion of merged requests ---

TEST_F(MergeQueueTest, FailedMergedRequestFailsEveryMemberWithEio) {
  Build(MergePolicy(), /*room=*/0);
  TestIo* a = Write(0, 8);
  TestIo* b = Write(8, 8);
  TestIo* alone = Write(100, 8);
  TestIo* r0 = Read(200, 8);
  TestIo* r1 = Read(208, 8);
  TestIo* r_alone = Read(300, 8);
  EXPECT_EQ(Get(Counter::merges_write), 1u);
  EXPECT_EQ(Get(Counter::merges_read), 1u);
  OpenRing(4);
  std::vector<Written> written = ring_->written();
  ASSERT_EQ(written.size(), 4u);
  ASSERT_EQ(written[0].sector, 0u);
  ASSERT_EQ(written[1].sector, 100u);
  ASSERT_EQ(written[2].sector, 200u);
  ASSERT_EQ(written[3].sector, 300u);
  AnswerRequest(0, -EIO);
  AnswerRequest(1, 0);
  // Any failure of a merged request is EIO for each of its members.
  AnswerRequest(2, -EOPNOTSUPP);
  FillSegments(written[3], 5);
  AnswerRequest(3, 0);
  ASSERT_TRUE(WaitAll());
  EXPECT_EQ(a->result, -EIO);
  EXPECT_EQ(b->result, -EIO);
  EXPECT_EQ(alone->result, 0);
  EXPECT_EQ(r0->result, -EIO);
  EXPECT_EQ(r1->result, -EIO);
  EXPECT_TRUE(r0->read_data.empty());
  EXPECT_TRUE(r1->read_data.empty());
  EXPECT_EQ(r_alone->result, 0);
  EXPECT_TRUE(r_alone->read_data == Pattern(300, 8, 5));
  for (TestIo* io : {a, b, alone, r0, r1, r_alone}) EXPECT_EQ(io->calls, 1);

  // The queue goes on: the ring has room now, so this goes straight out.
  TestIo* after = Write(8, 8);
  ASSERT_EQ(ring_->written().size(), 5u);
  AnswerRequest(4, 0);
  ASSERT_TRUE(WaitAll());
  EXPECT_EQ(after->result, 0);
}

TEST_F(MergeQueueTest, SingleMemberRequestKeepsItsOwnError) {
  Build(MergePolicy(), /*room=*/32);
  TestIo* write = Write(0, 8);
  TestIo* discard = Submit(BlockOp::kDiscard, 100, 8);
  TestIo* read = Read(200, 8);
  TestIo* flush = Submit(BlockOp::kFlush, 0, 0);
  ASSERT_EQ(ring_->written().size(), 4u);
  AnswerRequest(0, -EOPNOTSUPP);
  AnswerRequest(1, -EOPNOTSUPP);
  AnswerRequest(2, -EIO);
  AnswerRequest(3, -EOPNOTSUPP);
  ASSERT_TRUE(WaitAll());
  EXPECT_EQ(write->result, -EOPNOTSUPP);
  EXPECT_EQ(discard->result, -EOPNOTSUPP);
  EXPECT_EQ(read->result, -EIO);
  EXPECT_TRUE(read->read_data.empty());
  EXPECT_EQ(flush->result, -EOPNOTSUPP);
}

// --- End to end: a real Transport ---

using EngineAndProtocol = std::tuple<io::EngineKind, const Protocol*>;

std::string EngineAndProtocolName(
    const ::testing::TestParamInfo<EngineAndProtocol>& info) {
  return std::string(io::EngineKindName(std::get<0>(info.param))) + "_" +
         testing::ProtocolTestName(std::get<1>(info.param));
}

class MergeTransportTest
    : public testing::TransportFixture,
      public ::testing::WithParamInterface<EngineAndProtocol> {};

// Threads write their own sequential runs of 4 KiB blocks (interleaved
// stripes), as fast as they can, through a 32-entry ring: adjacent writes
// that meet in the staging queue merge. Then the same for reads.
TEST_P(MergeTransportTest, ConcurrentSequentialWritesMerge) {
  TransportConfig config;
  config.engine = std::get<0>(GetParam());
  config.protocol = std::get<1>(GetParam());
  config.ring_size = 32;
  config.max_segments = 11;
  StartTransport(config);
  if (!transport_) return;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 400;
  constexpr int kTotal = kThreads * kPerThread;
  constexpr uint64_t kStripe = uint64_t{8} * kPerThread;

  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> ios;
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kPerThread; ++k) {
      ios.push_back(
          NewIo(waiter, BlockOp::kWrite, t * kStripe + 8 * k, 8, nullptr));
    }
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string buffer;
      for (int k = 0; k < kPerThread; ++k) {
        TestIo* io = ios[t * kPerThread + k];
        buffer = Pattern(io->sector, 8, 11);
        io->write_data = Bytes(buffer);
        Submit(io);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Wait(waiter, kTotal);
  if (hung_) return;
  for (TestIo* io : ios) {
    ASSERT_EQ(io->result, 0) << "write at " << io->sector;
    ASSERT_EQ(io->calls, 1) << "write at " << io->sector;
  }
  const uint64_t total_sectors = kThreads * kStripe;
  EXPECT_TRUE(ReadImage(0, total_sectors) == Pattern(0, total_sectors, 11))
      << "image differs";
  EXPECT_GT(Get(Counter::merges_write), 0u);
  EXPECT_EQ(Get(Counter::reqs_write) + Get(Counter::merges_write),
            uint64_t{kTotal});
  EXPECT_EQ(Get(Counter::sectors_written), total_sectors);
  EXPECT_EQ(Get(Counter::segments), uint64_t{kTotal});
  EXPECT_EQ(Get(Counter::merges_read), 0u);
  EXPECT_EQ(Get(Counter::errors), 0u);
  EXPECT_EQ(Get(Counter::invalid_reqs), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_LE(Get(Counter::inflight_max), 32u);

  // Reads of the same blocks, concurrently: each gets its own bytes.
  Waiter* read_waiter = NewWaiter();
  std::vector<TestIo*> reads;
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kPerThread; ++k) {
      reads.push_back(
          NewIo(read_waiter, BlockOp::kRead, t * kStripe + 8 * k, 8, nullptr));
    }
  }
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) Submit(reads[t * kPerThread + k]);
    });
  }
  for (auto& thread : threads) thread.join();
  Wait(read_waiter, kTotal);
  if (hung_) return;
  for (TestIo* io : reads) {
    ASSERT_EQ(io->result, 0) << "read at " << io->sector;
    ASSERT_TRUE(io->read_data == Pattern(io->sector, 8, 11))
        << "read at " << io->sector << " got other bytes";
  }
  EXPECT_EQ(Get(Counter::reqs_read) + Get(Counter::merges_read),
            uint64_t{kTotal});
  EXPECT_EQ(Get(Counter::sectors_read), total_sectors);
}

// The "Merge" prefix keeps these in --gtest_filter='Merge*'.
INSTANTIATE_TEST_SUITE_P(
    MergeEnginesAndProtocols, MergeTransportTest,
    ::testing::Combine(
        ::testing::Values(io::EngineKind::kSync, io::EngineKind::kUring),
        ::testing::Values(&BlkifProtocol(), &VirtioProtocol(),
                          &VirtioPackedProtocol(), &NvmeProtocol())),
    EngineAndProtocolName);

}  // namespace
}  // namespace pvdisk::transport
