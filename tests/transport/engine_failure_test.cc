// A backend whose engine fails as a whole (Run() returns a negative errno)
// must not leave a request it had taken unanswered, which would hang its
// callers and Shutdown(): the backend tears the engine down, answers what
// it held with EIO, makes a new engine and goes on serving.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/failing_engine.h"
#include "stats/counters.h"
#include "transport/blkif/protocol.h"
#include "transport/block_io.h"
#include "transport/virtio/protocol.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;
using testing::Waiter;

using EngineAndIrq = std::tuple<io::EngineKind, InterruptMode>;

class EngineFailureTest : public testing::TransportFixture,
                          public ::testing::WithParamInterface<EngineAndIrq> {};

TEST_P(EngineFailureTest, RequestsFailWithEioThenTheDiskServesAgain) {
  constexpr int kWrites = 256;
  constexpr uint64_t kFailAt = 40;
  TransportConfig config;
  config.engine = std::get<0>(GetParam());
  config.irq = std::get<1>(GetParam());
  config.ring_size = 64;
  config.fail_trigger = std::make_shared<io::EngineFailTrigger>(kFailAt);
  StartTransport(config);
  if (!transport_) return;

  // A burst of 4 KiB writes to distinct blocks: the engine fails in the
  // middle of it.
  std::vector<std::string> data;
  for (int i = 0; i < kWrites; ++i) data.push_back(Pattern(i * 8, 8, 21));
  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> writes;
  for (int i = 0; i < kWrites; ++i) {
    writes.push_back(NewIo(waiter, BlockOp::kWrite, uint64_t(i) * 8, 8,
                           testing::Bytes(data[i])));
    Submit(writes.back());
  }
  Wait(waiter, kWrites);  // fails (and leaves everything behind) on a hang
  if (hung_) return;
  int failed = 0;
  for (TestIo* write : writes) {
    EXPECT_EQ(write->calls, 1);
    if (write->result != 0) {
      EXPECT_EQ(write->result, -EIO);
      ++failed;
    }
  }
  EXPECT_GE(failed, 1) << "the failure reached no caller";
  EXPECT_EQ(Get(Counter::engine_restarts), 1u);
  // `errors` counts failed ring requests; a failed request that merged
  // several writes fails each of them (under load the burst merges: CI saw
  // 64 errors for 74 failed writes). So between the two: at least one
  // write per failed request, at most one more per merge.
  EXPECT_GE(Get(Counter::errors), 1u);
  EXPECT_LE(Get(Counter::errors), static_cast<uint64_t>(failed));
  EXPECT_LE(static_cast<uint64_t>(failed),
            Get(Counter::errors) + Get(Counter::merges_write));
  EXPECT_EQ(Get(Counter::inflight), 0u);

  // The disk serves again: every block written now reads back, through the
  // transport and in the image.
  for (int i = 0; i < kWrites; i += 17) {
    const std::string fresh = Pattern(uint64_t(i) * 8, 8, 22);
    ASSERT_EQ(Run(BlockOp::kWrite, uint64_t(i) * 8, 8, &fresh)->result, 0);
    TestIo* read = Run(BlockOp::kRead, uint64_t(i) * 8, 8);
    ASSERT_EQ(read->result, 0);
    EXPECT_TRUE(read->read_data == fresh) << "block " << i;
    EXPECT_TRUE(ReadImage(uint64_t(i) * 8, 8) == fresh) << "block " << i;
  }
  // Blocks whose write succeeded hold their data.
  for (int i = 0; i < kWrites; ++i) {
    if (i % 17 == 0 || writes[i]->result != 0) continue;
    EXPECT_TRUE(ReadImage(uint64_t(i) * 8, 8) == data[i]) << "block " << i;
  }
  EXPECT_EQ(Get(Counter::engine_restarts), 1u);
  transport_->Shutdown();  // returns: nothing was left unanswered
}

INSTANTIATE_TEST_SUITE_P(
    EnginesAndIrqModes, EngineFailureTest,
    ::testing::Combine(
        ::testing::Values(io::EngineKind::kSync, io::EngineKind::kUring),
        ::testing::Values(InterruptMode::kInline, InterruptMode::kThread)),
    [](const ::testing::TestParamInfo<EngineAndIrq>& info) {
      return std::string(io::EngineKindName(std::get<0>(info.param))) + "_" +
             std::string(InterruptModeName(std::get<1>(info.param)));
    });

}  // namespace
}  // namespace pvdisk::transport
