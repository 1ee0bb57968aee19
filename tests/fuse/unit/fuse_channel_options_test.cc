// CheckFuseChannelOptions and CheckFuseSpread (fuse/fuse_channel_options.h):
// what the FUSE channel flags ask of each other, without a mount.
#include "fuse/fuse_channel_options.h"

#include <string>

#include "fuse/disk.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse {
namespace {

using channel::FuseIo;

std::string ErrorOf(const FuseChannelOptions& options,
                    const FuseChannelFlags& given, bool in_place = true) {
  absl::StatusOr<FuseIo> checked =
      CheckFuseChannelOptions(options, given, in_place);
  EXPECT_FALSE(checked.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(checked.status())) << checked.status();
  return std::string(checked.status().message());
}

FuseChannelOptions Asked(FuseIo fuse_io) {
  FuseChannelOptions options;
  options.fuse_io = fuse_io;
  return options;
}

TEST(CheckFuseChannelOptionsTest, DefaultsPassAsAsked) {
  for (FuseIo io : {FuseIo::kAuto, FuseIo::kUring, FuseIo::kClassic}) {
    absl::StatusOr<FuseIo> checked =
        CheckFuseChannelOptions(Asked(io), {}, true);
    ASSERT_TRUE(checked.ok()) << checked.status();
    EXPECT_EQ(*checked, io);
  }
}

TEST(CheckFuseChannelOptionsTest, FuseThreadsAskForClassicNotUring) {
  FuseChannelFlags threads;
  threads.fuse_threads = true;
  absl::StatusOr<FuseIo> checked =
      CheckFuseChannelOptions(Asked(FuseIo::kAuto), threads, true);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(*checked, FuseIo::kClassic);
  EXPECT_EQ(ErrorOf(Asked(FuseIo::kUring), threads),
            "--fuse-threads sets the /dev/fuse workers of --fuse-io classic; "
            "--fuse-io uring has one queue per CPU (see --fuse-queue-depth)");
}

TEST(CheckFuseChannelOptionsTest, UringQueueFlagsAreRefusedOnClassic) {
  const std::pair<bool FuseChannelFlags::*, std::string> flags[] = {
      {&FuseChannelFlags::queue_depth, "--fuse-queue-depth"},
      {&FuseChannelFlags::queue_pin, "--fuse-queue-pin"},
      {&FuseChannelFlags::huge_entries, "--fuse-huge-entries"},
      {&FuseChannelFlags::spread, "--fuse-spread"}};
  for (const auto& [member, flag] : flags) {
    FuseChannelFlags given;
    given.*member = true;
    EXPECT_EQ(ErrorOf(Asked(FuseIo::kClassic), given),
              flag +
                  " sets the io_uring queues of --fuse-io uring (or auto); "
                  "--fuse-io classic has none (see --fuse-threads)");
    // Also when --fuse-threads is what asked for classic.
    given.fuse_threads = true;
    EXPECT_NE(ErrorOf(Asked(FuseIo::kAuto), given).find(flag + " sets"),
              std::string::npos);
    // And allowed on uring.
    given.fuse_threads = false;
    EXPECT_TRUE(
        CheckFuseChannelOptions(Asked(FuseIo::kUring), given, true).ok());
  }
}

TEST(CheckFuseChannelOptionsTest, HugeEntriesFitAQueueAndNeedPayloadsInPlace) {
  FuseChannelOptions options = Asked(FuseIo::kAuto);
  options.queue_depth = 8;
  options.huge_entries = 9;
  EXPECT_EQ(ErrorOf(options, {}),
            "--fuse-huge-entries 9 is more than the entries of a queue "
            "(--fuse-queue-depth 8): use 0 to 8");
  options.huge_entries = 8;
  FuseChannelFlags given;
  given.huge_entries = true;
  EXPECT_TRUE(CheckFuseChannelOptions(options, given, true).ok());
  EXPECT_NE(ErrorOf(options, given, /*in_place=*/false)
                .find("needs --persistent on and --backend thread"),
            std::string::npos);
  // Left at its default, it does not matter where payloads are copied.
  EXPECT_TRUE(CheckFuseChannelOptions(options, {}, false).ok());
}

TEST(CheckFuseSpreadTest, SpreadAskedNeedsTheInlinePlacement) {
  FuseChannelOptions options = Asked(FuseIo::kUring);
  options.spread = true;
  FuseChannelFlags given;
  given.spread = true;
  absl::Status refused =
      CheckFuseSpread(options, given, transport::Placement::kBackendThread);
  EXPECT_TRUE(absl::IsInvalidArgument(refused));
  EXPECT_NE(std::string(refused.message())
                .find("--fuse-spread on moves replies between the FUSE queue "
                      "threads of the inline placement"),
            std::string::npos)
      << refused;
  EXPECT_TRUE(
      CheckFuseSpread(options, given, transport::Placement::kInline).ok());
  // The default (not given), or off, goes with any placement.
  EXPECT_TRUE(
      CheckFuseSpread(options, {}, transport::Placement::kBackendThread).ok());
  options.spread = false;
  EXPECT_TRUE(
      CheckFuseSpread(options, given, transport::Placement::kBackendThread)
          .ok());
}

TEST(SpreadAppliesTest, OnlyAskedOnUringInlineWithTwoQueuesOrMore) {
  FuseChannelOptions options = Asked(FuseIo::kUring);
  options.spread = true;
  EXPECT_TRUE(SpreadApplies(options, transport::Placement::kInline, 2));
  EXPECT_FALSE(SpreadApplies(options, transport::Placement::kInline, 1));
  EXPECT_FALSE(SpreadApplies(options, transport::Placement::kBackendThread, 2));
  options.fuse_io = FuseIo::kClassic;
  EXPECT_FALSE(SpreadApplies(options, transport::Placement::kInline, 2));
  options = Asked(FuseIo::kUring);
  options.spread = false;
  EXPECT_FALSE(SpreadApplies(options, transport::Placement::kInline, 2));
}

FlagValues Given(std::map<std::string, std::string, std::less<>> values) {
  return FlagValues(std::move(values));
}

std::string FlagErrorOf(
    std::map<std::string, std::string, std::less<>> values) {
  absl::StatusOr<FuseChannelRequest> read =
      FuseChannelFromFlags(Given(std::move(values)), true);
  EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
  return std::string(read.status().message());
}

TEST(FuseChannelFromFlagsTest, NoFlagsGiveTheDefaults) {
  absl::StatusOr<FuseChannelRequest> read =
      FuseChannelFromFlags(Given({}), true);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->options.fuse_io, FuseIo::kAuto);
  EXPECT_EQ(read->options.classic_threads, kDefaultFuseThreads);
  EXPECT_EQ(read->options.queue_depth, channel::kDefaultUringQueueDepth);
  EXPECT_EQ(read->options.huge_entries, channel::kDefaultHugeEntries);
  EXPECT_EQ(read->options.queue_pin, channel::QueuePin::kAuto);
  EXPECT_EQ(read->options.auto_pin_deep_at, channel::AutoPin::kDeepAtOnce);
  EXPECT_TRUE(read->options.spread);
  EXPECT_FALSE(read->given.spread || read->given.queue_depth ||
               read->given.fuse_threads || read->given.queue_pin ||
               read->given.huge_entries);
}

TEST(FuseChannelFromFlagsTest, NumbersHaveTheirRanges) {
  EXPECT_EQ(FlagErrorOf({{"fuse-threads", "0"}}),
            "--fuse-threads '0' is not allowed: use a whole number from 1 to "
            "64");
  EXPECT_EQ(FlagErrorOf({{"fuse-threads", "65"}}),
            "--fuse-threads '65' is not allowed: use a whole number from 1 to "
            "64");
  EXPECT_EQ(FlagErrorOf({{"fuse-queue-depth", "0"}}),
            "--fuse-queue-depth '0' is not allowed: use a whole number from 1 "
            "to 1024");
  EXPECT_EQ(FlagErrorOf({{"fuse-huge-entries", "1025"}}),
            "--fuse-huge-entries '1025' is not allowed: use a whole number "
            "from 0 to 1024");
}

TEST(FuseChannelFromFlagsTest, HugeEntriesDefaultToNoMoreThanTheDepth) {
  absl::StatusOr<FuseChannelRequest> read =
      FuseChannelFromFlags(Given({{"fuse-queue-depth", "8"}}), true);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->options.queue_depth, 8u);
  EXPECT_EQ(read->options.huge_entries, 8u);
  EXPECT_TRUE(read->given.queue_depth);
}

TEST(DefaultFuseQueueDepthTest, FollowsTheRingOnlyUnderADelayModel) {
  // No delay: the default whatever the ring.
  EXPECT_EQ(DefaultFuseQueueDepth(false, 1024),
            channel::kDefaultUringQueueDepth);
  EXPECT_EQ(DefaultFuseQueueDepth(false, 8), channel::kDefaultUringQueueDepth);
  // A delay: the ring's slots, never fewer than the default, never more
  // than the most a queue may have.
  EXPECT_EQ(DefaultFuseQueueDepth(true, 1024), 1024u);
  EXPECT_EQ(DefaultFuseQueueDepth(true, 256), 256u);
  EXPECT_EQ(DefaultFuseQueueDepth(true, 8), channel::kDefaultUringQueueDepth);
  EXPECT_EQ(DefaultFuseQueueDepth(true, 4096), channel::kMaxUringQueueDepth);
}

TEST(AutoPinDeepAtTest, UnderADelayModelOnlyADeepCallerCounts) {
  EXPECT_EQ(AutoPinDeepAt(false), channel::AutoPin::kDeepAtOnce);
  EXPECT_EQ(AutoPinDeepAt(false), 2u);
  EXPECT_EQ(AutoPinDeepAt(true), kDelayedDeepAtOnce);
  EXPECT_GT(kDelayedDeepAtOnce, channel::AutoPin::kDeepAtOnce);
}

TEST(ChannelDefaultsForTest, ADelayOnAnyDiskCounts) {
  std::vector<DiskSpec> disks(3);
  ChannelDefaultsInput input = ChannelDefaultsFor(disks, 512);
  EXPECT_FALSE(input.delayed);
  EXPECT_EQ(input.ring_size, 512u);
  disks[2].delay = io::CompletionDelay{500, 500};
  input = ChannelDefaultsFor(disks, 512);
  EXPECT_TRUE(input.delayed);
  EXPECT_FALSE(ChannelDefaultsFor({}, 512).delayed);
}

TEST(FuseChannelFromFlagsTest, ADelayModelSetsTheDefaultsItNeeds) {
  const ChannelDefaultsInput delayed{.delayed = true, .ring_size = 1024};
  absl::StatusOr<FuseChannelRequest> read =
      FuseChannelFromFlags(Given({}), true, delayed);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->options.queue_depth, 1024u);
  EXPECT_EQ(read->options.huge_entries, channel::kDefaultHugeEntries);
  EXPECT_EQ(read->options.queue_pin, channel::QueuePin::kAuto);
  EXPECT_EQ(read->options.auto_pin_deep_at, kDelayedDeepAtOnce);
  // The flags given win over the defaults.
  read = FuseChannelFromFlags(
      Given({{"fuse-queue-pin", "off"}, {"fuse-queue-depth", "64"}}), true,
      delayed);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->options.queue_pin, channel::QueuePin::kOff);
  EXPECT_EQ(read->options.queue_depth, 64u);
  // The checks see the depth the mount will have: more huge entries than
  // the default 128 are fine where the depth follows a 1024-slot ring.
  read = FuseChannelFromFlags(Given({{"fuse-huge-entries", "200"}}), true,
                              delayed);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->options.huge_entries, 200u);
  // No delay: the plain defaults, whatever the ring.
  read = FuseChannelFromFlags(
      Given({}), true,
      ChannelDefaultsInput{.delayed = false, .ring_size = 1024});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->options.queue_depth, channel::kDefaultUringQueueDepth);
  EXPECT_EQ(read->options.auto_pin_deep_at, channel::AutoPin::kDeepAtOnce);
}

TEST(FuseChannelFromFlagsTest, WordsAreRefusedOutsideTheirSet) {
  EXPECT_EQ(FlagErrorOf({{"fuse-io", "fast"}}),
            "--fuse-io 'fast' is not allowed: use auto, uring or classic");
  EXPECT_NE(FlagErrorOf({{"fuse-queue-pin", "maybe"}}).find("--fuse-queue-pin"),
            std::string::npos);
  EXPECT_EQ(FlagErrorOf({{"fuse-spread", "yes"}}),
            "--fuse-spread 'yes' is not allowed: use on or off");
}

TEST(FuseChannelFromFlagsTest, TheFlagsAreCheckedAgainstEachOther) {
  // CheckFuseChannelOptions' rules, reached through the flags: the
  // channel --fuse-threads asks for, and a uring flag with classic.
  absl::StatusOr<FuseChannelRequest> read =
      FuseChannelFromFlags(Given({{"fuse-threads", "8"}}), true);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->options.fuse_io, FuseIo::kClassic);
  EXPECT_EQ(read->options.classic_threads, 8u);
  EXPECT_EQ(FlagErrorOf({{"fuse-io", "classic"}, {"fuse-spread", "on"}}),
            "--fuse-spread sets the io_uring queues of --fuse-io uring (or "
            "auto); --fuse-io classic has none (see --fuse-threads)");
}

}  // namespace
}  // namespace pvdisk::fuse
