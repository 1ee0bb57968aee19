// DecidePlacement (cli/placement.h): the one place the placement is
// decided, from the checked flags, the FUSE channel the kernel gave and the
// memory budget.
#include <string>

#include "cli/placement.h"
#include "gtest/gtest.h"
#include "transport/memory_budget.h"
#include "transport/protocol.h"

namespace pvdisk::cli {
namespace {

using fuse::channel::FuseIo;
using transport::Placement;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Two queues on backend threads, blkif, the default ring: what the flags
// set without placement flags.
PlacementInput Input(PlacementFlag wanted, FuseIo asked, FuseIo resolved) {
  PlacementInput input;
  input.wanted = wanted;
  input.fuse_io_asked = asked;
  input.fuse_io = resolved;
  input.transport.queue.protocol = transport::FindProtocol("blkif").value();
  input.transport.queues = 2;
  input.cpus = 4;
  input.memory_budget = 64 * kGiB;
  return input;
}

std::string ErrorOf(const PlacementInput& input) {
  absl::StatusOr<transport::TransportOptions> decided = DecidePlacement(input);
  EXPECT_FALSE(decided.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(decided.status())) << decided.status();
  return std::string(decided.status().message());
}

TEST(DecidePlacementTest, AutoOnUringIsInlineWithOneQueuePerCpu) {
  absl::StatusOr<transport::TransportOptions> decided = DecidePlacement(
      Input(PlacementFlag::kAuto, FuseIo::kAuto, FuseIo::kUring));
  ASSERT_TRUE(decided.ok()) << decided.status();
  EXPECT_EQ(decided->placement, Placement::kInline);
  EXPECT_EQ(decided->queues, 4u);
  EXPECT_EQ(decided->queue_map, transport::QueueMap::kCpu);
  EXPECT_EQ(decided->queue.irq, transport::InterruptMode::kInline);
}

TEST(DecidePlacementTest, AutoKeepsBackendThreadsAsTheFlagsSetThem) {
  PlacementInput classic =
      Input(PlacementFlag::kAuto, FuseIo::kAuto, FuseIo::kClassic);
  PlacementInput against =
      Input(PlacementFlag::kAuto, FuseIo::kAuto, FuseIo::kUring);
  against.against_inline = "--queues 2";
  for (const PlacementInput& input : {classic, against}) {
    absl::StatusOr<transport::TransportOptions> decided =
        DecidePlacement(input);
    ASSERT_TRUE(decided.ok()) << decided.status();
    EXPECT_EQ(decided->placement, Placement::kBackendThread);
    EXPECT_EQ(decided->queues, 2u);
  }
}

TEST(DecidePlacementTest, AutoFallsBackToBackendThreadsOverTheBudget) {
  // A budget that 2 queues fit and 64 (one per CPU) do not.
  PlacementInput input =
      Input(PlacementFlag::kAuto, FuseIo::kAuto, FuseIo::kUring);
  input.cpus = 64;
  const uint64_t two_queues =
      transport::TransportMemoryOf(input.transport, true).total();
  const uint64_t per_cpu =
      transport::TransportMemoryOf(InlineTransport(input.transport, 64), true)
          .total();
  ASSERT_LT(two_queues, per_cpu);
  input.memory_budget = two_queues;
  absl::StatusOr<transport::TransportOptions> decided = DecidePlacement(input);
  ASSERT_TRUE(decided.ok()) << decided.status();
  EXPECT_EQ(decided->placement, Placement::kBackendThread);
  EXPECT_EQ(decided->queues, 2u);

  // Asked for, inline must fit.
  input.wanted = PlacementFlag::kInline;
  EXPECT_NE(ErrorOf(input).find("--max-memory"), std::string::npos)
      << ErrorOf(input);
  // And backend threads too.
  input.wanted = PlacementFlag::kBackendThread;
  input.memory_budget = two_queues - 1;
  EXPECT_NE(ErrorOf(input).find("--max-memory"), std::string::npos)
      << ErrorOf(input);
}

TEST(DecidePlacementTest, BackendThreadIsTakenAsAsked) {
  absl::StatusOr<transport::TransportOptions> decided = DecidePlacement(
      Input(PlacementFlag::kBackendThread, FuseIo::kAuto, FuseIo::kUring));
  ASSERT_TRUE(decided.ok()) << decided.status();
  EXPECT_EQ(decided->placement, Placement::kBackendThread);
  EXPECT_EQ(decided->queues, 2u);
}

TEST(DecidePlacementTest, InlineIsRefusedWithWhatItNeeds) {
  EXPECT_EQ(
      ErrorOf(
          Input(PlacementFlag::kInline, FuseIo::kClassic, FuseIo::kClassic)),
      "--placement inline needs --fuse-io uring (or auto): the FUSE uring "
      "queues' threads are what drives the disk queues; with --fuse-io "
      "classic use --placement backend-thread");
  EXPECT_EQ(
      ErrorOf(Input(PlacementFlag::kInline, FuseIo::kAuto, FuseIo::kClassic)),
      "--placement inline needs FUSE over io_uring, which this kernel does "
      "not offer (see --fuse-io); use --placement backend-thread");
  PlacementInput against =
      Input(PlacementFlag::kInline, FuseIo::kUring, FuseIo::kUring);
  against.against_inline = "--irq thread";
  EXPECT_EQ(ErrorOf(against),
            "--irq thread does not go with --placement inline, where each "
            "FUSE queue's thread drives one queue per disk (4 queues, "
            "--queue-map cpu, no backend threads, --irq inline); drop it or "
            "use --placement backend-thread");
}

TEST(DecidePlacementTest, InlineAskedOnUringIsInline) {
  absl::StatusOr<transport::TransportOptions> decided = DecidePlacement(
      Input(PlacementFlag::kInline, FuseIo::kUring, FuseIo::kUring));
  ASSERT_TRUE(decided.ok()) << decided.status();
  EXPECT_EQ(decided->placement, Placement::kInline);
  EXPECT_EQ(decided->queues, 4u);
}

}  // namespace
}  // namespace pvdisk::cli
