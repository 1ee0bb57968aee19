// Requests whose pages need more iovecs than an engine takes (IOV_MAX):
// with --max-segments above 1024, front merges of one-page reads (each on
// its own page, in descending page order) could make ring requests of more
// than 1024 separate runs, which an engine refuses with EINVAL, failing
// every read merged into one with EIO. So merges stop at io::kMaxIovecs
// runs, and the backend serves any request that still has more through one
// contiguous copy (`bounced_reqs`).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"
#include "stats/counters.h"
#include "transport/block_io.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;
using testing::Waiter;

class IovLimitTest : public testing::TransportFixture {};

// Ring 32, max_segments 2048, the sync engine,
// 1,132 one-page reads submitted in descending sector order before the
// transport starts, so that each front-merges into the one staged before.
TEST_F(IovLimitTest, DescendingOnePageReadsMergeWithinTheEngineLimit) {
  constexpr uint64_t kReads = 1132;
  const std::string image = Pattern(0, kReads * 8, 11);
  WriteImage(0, image);
  TransportConfig config;
  config.engine = io::EngineKind::kSync;
  config.ring_size = 32;
  config.max_segments = 2048;
  StartTransport(config, /*start=*/false);
  if (!transport_) return;
  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> reads;
  for (uint64_t i = kReads; i > 0; --i) {
    TestIo* io = NewIo(waiter, BlockOp::kRead, (i - 1) * 8, 8, nullptr);
    reads.push_back(io);
    Submit(io);
  }
  transport_->Start();
  Wait(waiter, static_cast<int>(kReads));
  if (hung_) return;
  for (TestIo* read : reads) {
    ASSERT_EQ(read->result, 0) << "read of sector " << read->sector;
    ASSERT_TRUE(read->read_data == image.substr(read->sector * 512, 4096))
        << "read of sector " << read->sector << " returned other data";
  }
  EXPECT_EQ(Get(Counter::errors), 0u);
  // They did merge: more reads than one request may carry runs of pages.
  EXPECT_GT(Get(Counter::merges_read), uint64_t{io::kMaxIovecs});
  EXPECT_EQ(Get(Counter::bounced_reqs), 0u);
}

}  // namespace
}  // namespace pvdisk::transport
