// FrontendQueue::Reconnect: a backend that took requests off the
// ring and died without answering them is replaced by a new one on the
// re-initialised ring, and every request it had not answered is served by
// the new one: the writes reach the image, and a response the dead backend
// had published counts as the answer (it is not re-issued). The backends
// here are real BackendLoops over the queue's shared region; only the dead
// one is played by the test (it takes requests and stops).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "stats/counters.h"
#include "transport/backend_group.h"
#include "transport/blkif/protocol.h"
#include "transport/device_side.h"
#include "transport/virtio/protocol.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;

class ReconnectTest : public testing::TransportFixture,
                      public ::testing::WithParamInterface<const Protocol*> {};

TEST_P(ReconnectTest, UnansweredRequestsAreServedByTheNewBackend) {
  TransportConfig config;
  config.engine = io::EngineKind::kSync;
  config.protocol = GetParam();
  config.irq = InterruptMode::kThread;
  config.backend_elsewhere = true;
  config.policy.merge = false;  // one ring request per write
  StartTransport(config);
  if (!transport_) return;
  Queue& queue = transport_->queue(0);

  constexpr int kWrites = 8;
  std::vector<std::string> data;
  testing::Waiter* waiter = NewWaiter();
  std::vector<TestIo*> ios;
  for (int i = 0; i < kWrites; ++i) {
    data.push_back(Pattern(static_cast<uint64_t>(i) * 64, 8, 7));
    ios.push_back(NewIo(waiter, BlockOp::kWrite, static_cast<uint64_t>(i) * 64,
                        8, testing::Bytes(data.back())));
    Submit(ios.back());
  }

  // The backend that dies: it takes every request, answers the first one
  // (publishing the response without interrupting) and is gone.
  int taken = 0;
  {
    absl::StatusOr<DeviceSide> dead =
        AttachDeviceSide(queue.options(), &queue.region(), &queue.stats());
    ASSERT_TRUE(dead.ok()) << dead.status();
    DeviceRequest request;
    DeviceRequest first;
    while (dead->ring->TakeRequest(&request) == TakeResult::kValid) {
      if (taken == 0) first = request;
      ++taken;
    }
    ASSERT_EQ(taken, kWrites);
    dead->ring->PutResponse(first, 0);
    dead->ring->PublishResponses();
  }

  queue.ReconnectRing();
  EXPECT_EQ(queue.stats().Snapshot().Get(Counter::reissued_reqs),
            uint64_t{kWrites - 1});

  // The new backend attaches to the re-initialised ring like a first one.
  absl::StatusOr<DeviceSide> fresh =
      AttachDeviceSide(queue.options(), &queue.region(), &queue.stats());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  BackendQueue backend;
  backend.ring = fresh->ring.get();
  backend.grants = fresh->grants.get();
  backend.kick = &queue.kick();
  backend.irq = &queue.irq();
  backend.stats = &queue.stats();
  backend.ring_slots = queue.options().ring_size;
  absl::StatusOr<BackendGroup> group =
      MakeBackendGroup({backend}, {fresh->pool}, 1, queue.options().ring_size,
                       BackendOptions{}, factory_);
  ASSERT_TRUE(group.ok()) << group.status();
  for (auto& loop : group->loops) loop->Start();

  Wait(waiter, kWrites);
  for (TestIo* io : ios) EXPECT_EQ(io->result, 0);
  // The first write was answered by the dead backend (without doing it, in
  // this test): it was not re-issued, so it is not on the image. Every
  // other one is.
  EXPECT_NE(ReadImage(0, 8), data[0]);
  for (int i = 1; i < kWrites; ++i) {
    EXPECT_EQ(ReadImage(static_cast<uint64_t>(i) * 64, 8), data[i])
        << "write " << i;
  }
  EXPECT_EQ(queue.stats().Snapshot().Get(Counter::inflight), 0u);
  transport_->Shutdown();
  for (auto& loop : group->loops) loop->Stop();
}

INSTANTIATE_TEST_SUITE_P(Protocols, ReconnectTest,
                         ::testing::Values(&BlkifProtocol(), &VirtioProtocol()),
                         [](const auto& info) {
                           return std::string(info.param->name());
                         });

}  // namespace
}  // namespace pvdisk::transport
