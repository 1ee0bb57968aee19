// A valid request whose pages need more iovecs than an engine takes
// (io::kMaxIovecs): our own frontend never sends one (merges stop at that
// bound), but another frontend may scatter its pages. The backend serves it
// through one contiguous copy (`bounced_reqs`), never failing it for a limit
// of the engine. Here a hand-driven blkif driver ring
// sends 2048-page requests whose pages are all apart.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/image_file.h"
#include "ring_memory.h"
#include "stats/queue_stats.h"
#include "transport/backend_loop.h"
#include "transport/blkif/device_ring.h"
#include "transport/blkif/driver_ring.h"
#include "transport/event_fd.h"
#include "transport/grant_mapper.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;

constexpr uint32_t kSlots = 32;
constexpr uint32_t kSegments = 2048;
// Every other page, twice over (one request's pages, then another's), and
// the indirect table pages after them.
constexpr uint32_t kTablePage = 4 * kSegments;
constexpr uint32_t kDataPages = kTablePage + 8;

class BounceTest : public testing::TransportFixture {};

TEST_F(BounceTest, ScatteredPagesBeyondTheIovecLimitReadAndWriteCorrectly) {
  testing::RingMemory memory(kSlots, kDataPages);
  ASSERT_TRUE(memory.ok());
  BlkifDriverRing driver(memory.front_ring(), kSlots, memory.front_data(),
                         NotifyMode::kEventIdx);
  std::unique_ptr<GrantMapper> grants = NewPersistentGrants(memory.back_data());
  DeviceLimits limits;
  limits.disk_sectors = testing::kImageSectors;
  limits.data_pages = kDataPages;
  limits.max_segments = kSegments;
  BlkifDeviceRing device(memory.back_ring(), kSlots, grants.get(), limits,
                         NotifyMode::kEventIdx);
  auto kick = EventFd::Create();
  auto irq = EventFd::Create();
  ASSERT_TRUE(kick.ok() && irq.ok());
  stats::QueueStats stats;
  auto image = io::ImageFile::Open(path_, /*read_only=*/false,
                                   /*want_direct=*/true);
  ASSERT_TRUE(image.ok()) << image.status();
  io::ImageFile* image_file = image->get();

  BackendQueue queue;
  queue.ring = &device;
  queue.grants = grants.get();
  queue.kick = kick->get();
  queue.irq = irq->get();
  queue.stats = &stats;
  queue.ring_slots = kSlots;
  auto backend = BackendLoop::Create(
      {queue}, {},
      [image_file]() {
        io::EngineOptions options;
        options.kind = io::EngineKind::kSync;
        options.depth = kSlots;
        return io::CreateEngine(options, *image_file);
      },
      BackendOptions{});
  ASSERT_TRUE(backend.ok()) << backend.status();
  (*backend)->Start();

  // Sends one request over pages first_page, first_page + 2, ... (each
  // apart from the next) and returns its result, or 1 on a timeout.
  auto send = [&](BlockOp op, uint64_t id, uint32_t first_page) {
    std::vector<DataSegment> segments;
    for (uint32_t i = 0; i < kSegments; ++i) {
      segments.push_back(DataSegment{first_page + 2 * i, 0, 7});
    }
    std::vector<uint32_t> tables = {kTablePage, kTablePage + 1, kTablePage + 2,
                                    kTablePage + 3};
    RingRequest request;
    request.op = op;
    request.id = id;
    request.sector = 0;
    request.num_sectors = uint64_t{kSegments} * 8;
    request.segments = segments.data();
    request.segment_count = kSegments;
    request.table_pages = tables.data();
    request.table_page_count = static_cast<uint32_t>(tables.size());
    driver.Write(request);
    driver.Publish();
    (*kick)->Signal();
    int result = 1;
    const auto deadline = std::chrono::steady_clock::now() + testing::kTimeout;
    while (result == 1 && std::chrono::steady_clock::now() < deadline) {
      driver.ConsumeResponses([&](uint64_t, int r) { result = r; });
      if (result == 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return result;
  };

  // Write: the pattern goes into pages 0, 2, 4, ...
  const std::string data = testing::Pattern(0, uint64_t{kSegments} * 8, 41);
  for (uint32_t i = 0; i < kSegments; ++i) {
    std::memcpy(memory.front_data() + size_t{2 * i} * 4096,
                data.data() + size_t{i} * 4096, 4096);
  }
  ASSERT_EQ(send(BlockOp::kWrite, 1, 0), 0);
  EXPECT_TRUE(ReadImage(0, uint64_t{kSegments} * 8) == data);
  // Read it back into pages 2 * kSegments + 1, + 3, ...
  ASSERT_EQ(send(BlockOp::kRead, 2, 2 * kSegments + 1), 0);
  for (uint32_t i = 0; i < kSegments; ++i) {
    ASSERT_EQ(std::memcmp(memory.front_data() +
                              size_t{2 * kSegments + 1 + 2 * i} * 4096,
                          data.data() + size_t{i} * 4096, 4096),
              0)
        << "page " << i << " of the read";
  }
  EXPECT_EQ(stats.Snapshot().Get(Counter::bounced_reqs), 2u);
  EXPECT_EQ(stats.Snapshot().Get(Counter::errors), 0u);
  (*backend)->Stop();
}

}  // namespace
}  // namespace pvdisk::transport
