// TransportOptionsFromFlags (transport/transport_flags.h): pvdisk mount's
// transport flags, each against its range or words, and the result as a
// whole; one test per rule, with the message the user sees.
#include "transport/transport_flags.h"

#include <string>

#include "gtest/gtest.h"

namespace pvdisk::transport {
namespace {

FlagValues Given(std::map<std::string, std::string, std::less<>> values) {
  return FlagValues(std::move(values));
}

std::string ErrorOf(std::map<std::string, std::string, std::less<>> values) {
  absl::StatusOr<TransportOptions> read =
      TransportOptionsFromFlags(Given(std::move(values)));
  EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
  return std::string(read.status().message());
}

TEST(TransportFlagsTest, NoFlagsGiveTheDefaults) {
  absl::StatusOr<TransportOptions> read = TransportOptionsFromFlags(Given({}));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->queue.protocol->name(), "blkif");
  EXPECT_EQ(read->queue.ring_size, kDefaultRingSize);
  EXPECT_EQ(read->queue.max_segments, kDefaultSegments);
  EXPECT_EQ(read->queues, kDefaultQueues);
  EXPECT_EQ(read->backend_threads, 1u);
  EXPECT_EQ(read->queue_map, QueueMap::kOffset);
  EXPECT_EQ(read->backend.poll_us, kDefaultPollUs);
  EXPECT_EQ(read->backend.engine_max_inflight, 0u);
  EXPECT_TRUE(read->queue.policy.merge);
  EXPECT_EQ(read->queue.policy.dispatch, DispatchMode::kWhenRoom);
  EXPECT_EQ(read->queue.policy.plug_us, 0u);
  EXPECT_TRUE(read->queue.persistent);
  EXPECT_EQ(read->queue.notify, NotifyMode::kEventIdx);
  EXPECT_EQ(read->queue.irq, InterruptMode::kInline);
  EXPECT_EQ(read->placement, Placement::kBackendThread);
}

TEST(TransportFlagsTest, RingSizeIsWithinWhatTheFrontendAllows) {
  EXPECT_EQ(ErrorOf({{"ring-size", "16"}}),
            "--ring-size '16' is not allowed: use a whole number from 32 to "
            "4096");
  EXPECT_EQ(ErrorOf({{"ring-size", "8192"}}),
            "--ring-size '8192' is not allowed: use a whole number from 32 to "
            "4096");
  EXPECT_EQ(ErrorOf({{"frontend", "virtio"}, {"ring-size", "65536"}}),
            "--ring-size '65536' is not allowed: use a whole number from 32 "
            "to 32768");
  absl::StatusOr<TransportOptions> virtio = TransportOptionsFromFlags(
      Given({{"frontend", "virtio"}, {"ring-size", "8192"}}));
  ASSERT_TRUE(virtio.ok()) << virtio.status();
  EXPECT_EQ(virtio->queue.ring_size, 8192u);
}

TEST(TransportFlagsTest, RingSizeIsAPowerOfTwo) {
  EXPECT_NE(ErrorOf({{"ring-size", "100"}}).find("--ring-size"),
            std::string::npos);
}

TEST(TransportFlagsTest, AnUnknownFrontendIsRefused) {
  EXPECT_NE(ErrorOf({{"frontend", "foo"}}).find("--frontend"),
            std::string::npos);
}

TEST(TransportFlagsTest, MaxSegmentsIsFromDirectOnlyToTheIndirectLimit) {
  EXPECT_EQ(ErrorOf({{"max-segments", "10"}}),
            "--max-segments '10' is not allowed: use a whole number from 11 "
            "to 4096");
  EXPECT_EQ(ErrorOf({{"max-segments", "4097"}}),
            "--max-segments '4097' is not allowed: use a whole number from 11 "
            "to 4096");
}

TEST(TransportFlagsTest, QueuesAreOneToTheMaximum) {
  EXPECT_EQ(ErrorOf({{"queues", "0"}}),
            "--queues '0' is not allowed: use a whole number from 1 to 64");
  EXPECT_EQ(ErrorOf({{"queues", "65"}}),
            "--queues '65' is not allowed: use a whole number from 1 to 64");
}

TEST(TransportFlagsTest, BackendThreadsAreOneToTheQueues) {
  EXPECT_EQ(ErrorOf({{"backend-threads", "3"}}),
            "--backend-threads '3' is not allowed: use a whole number from 1 "
            "to 2");
  EXPECT_EQ(ErrorOf({{"queues", "4"}, {"backend-threads", "5"}}),
            "--backend-threads '5' is not allowed: use a whole number from 1 "
            "to 4");
  EXPECT_EQ(ErrorOf({{"backend-threads", "0"}}),
            "--backend-threads '0' is not allowed: use a whole number from 1 "
            "to 2");
}

TEST(TransportFlagsTest, AnUnknownQueueMapIsRefused) {
  EXPECT_NE(ErrorOf({{"queue-map", "bogus"}}).find("--queue-map"),
            std::string::npos);
}

TEST(TransportFlagsTest, PollAndPlugMicrosecondsHaveTheirRanges) {
  EXPECT_EQ(ErrorOf({{"poll-us", "-1"}}),
            "--poll-us '-1' is not allowed: use a whole number from 0 to "
            "1000000");
  EXPECT_EQ(ErrorOf({{"plug-us", "100001"}}),
            "--plug-us '100001' is not allowed: use a whole number from 0 to "
            "100000");
}

TEST(TransportFlagsTest, EngineMaxInflightIsACapOfAtLeastOne) {
  EXPECT_EQ(ErrorOf({{"engine-max-inflight", "0"}}),
            "--engine-max-inflight '0' is not allowed: use a whole number "
            "from 1 to 1048576");
  absl::StatusOr<TransportOptions> capped =
      TransportOptionsFromFlags(Given({{"engine-max-inflight", "128"}}));
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(capped->backend.engine_max_inflight, 128u);
}

TEST(TransportFlagsTest, TwoWaySwitchesTakeTheirTwoWordsOnly) {
  EXPECT_EQ(ErrorOf({{"merge", "maybe"}}),
            "--merge 'maybe' is not allowed: use on or off");
  EXPECT_EQ(ErrorOf({{"dispatch", "now"}}),
            "--dispatch 'now' is not allowed: use when-room or always");
  EXPECT_EQ(ErrorOf({{"persistent", "maybe"}}),
            "--persistent 'maybe' is not allowed: use on or off");
  EXPECT_EQ(ErrorOf({{"notify", "sometimes"}}),
            "--notify 'sometimes' is not allowed: use event-idx or always");
  absl::StatusOr<TransportOptions> read =
      TransportOptionsFromFlags(Given({{"merge", "off"},
                                       {"dispatch", "always"},
                                       {"persistent", "off"},
                                       {"notify", "always"}}));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->queue.policy.merge);
  EXPECT_EQ(read->queue.policy.dispatch, DispatchMode::kAlways);
  EXPECT_FALSE(read->queue.persistent);
  EXPECT_EQ(read->queue.notify, NotifyMode::kAlways);
}

TEST(TransportFlagsTest, AnUnknownIrqIsRefused) {
  EXPECT_NE(ErrorOf({{"irq", "sometimes"}}).find("--irq"), std::string::npos);
}

}  // namespace
}  // namespace pvdisk::transport
