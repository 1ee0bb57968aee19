#include "fuse/fuse_channel_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fuse/disk.h"

namespace pvdisk::fuse {

absl::StatusOr<channel::FuseIo> CheckFuseChannelOptions(
    const FuseChannelOptions& options, const FuseChannelFlags& given,
    bool payloads_in_place) {
  if (options.huge_entries > options.queue_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fuse-huge-entries ", options.huge_entries,
        " is more than the entries of a queue (--fuse-queue-depth ",
        options.queue_depth, "): use 0 to ", options.queue_depth));
  }
  // The payloads' pages matter only where the rings use them in place.
  if (given.huge_entries && !payloads_in_place) {
    return absl::InvalidArgumentError(
        "--fuse-huge-entries places the FUSE payloads that the rings read "
        "into and write from in place (zero copy), which needs --persistent "
        "on and --backend thread; otherwise they are copied and where they "
        "lie does not matter");
  }
  channel::FuseIo fuse_io = options.fuse_io;
  // Each channel has its own thread setting; asking for the other one's is
  // a mistake. --fuse-threads under auto asks for the classic channel.
  if (given.fuse_threads) {
    if (fuse_io == channel::FuseIo::kUring) {
      return absl::InvalidArgumentError(
          "--fuse-threads sets the /dev/fuse workers of --fuse-io classic; "
          "--fuse-io uring has one queue per CPU (see --fuse-queue-depth)");
    }
    fuse_io = channel::FuseIo::kClassic;
  }
  if (fuse_io == channel::FuseIo::kClassic) {
    const std::pair<bool, const char*> uring_flags[] = {
        {given.queue_depth, "fuse-queue-depth"},
        {given.queue_pin, "fuse-queue-pin"},
        {given.huge_entries, "fuse-huge-entries"},
        {given.spread, "fuse-spread"}};
    for (const auto& [is_given, flag] : uring_flags) {
      if (!is_given) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag,
          " sets the io_uring queues of --fuse-io uring (or auto); --fuse-io "
          "classic has none (see --fuse-threads)"));
    }
  }
  return fuse_io;
}

ChannelDefaultsInput ChannelDefaultsFor(const std::vector<DiskSpec>& disks,
                                        uint32_t ring_size) {
  ChannelDefaultsInput input;
  input.delayed =
      std::any_of(disks.begin(), disks.end(),
                  [](const DiskSpec& disk) { return disk.delay.has_value(); });
  input.ring_size = ring_size;
  return input;
}

absl::StatusOr<FuseChannelRequest> FuseChannelFromFlags(
    const FlagValues& flags, bool payloads_in_place,
    const ChannelDefaultsInput& disks) {
  FuseChannelRequest request;
  FuseChannelOptions& options = request.options;
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t fuse_threads,
      flags.Number("fuse-threads", kDefaultFuseThreads, 1, kMaxFuseThreads));
  options.classic_threads = static_cast<unsigned>(fuse_threads);
  PVDISK_ASSIGN_OR_RETURN(options.fuse_io,
                          channel::ParseFuseIo(flags.Get("fuse-io", "auto")));
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t queue_depth,
      flags.Number("fuse-queue-depth",
                   DefaultFuseQueueDepth(disks.delayed, disks.ring_size), 1,
                   channel::kMaxUringQueueDepth));
  options.queue_depth = static_cast<uint32_t>(queue_depth);
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t huge_entries,
      flags.Number("fuse-huge-entries",
                   std::min(channel::kDefaultHugeEntries, options.queue_depth),
                   0, channel::kMaxUringQueueDepth));
  options.huge_entries = static_cast<uint32_t>(huge_entries);
  PVDISK_ASSIGN_OR_RETURN(options.queue_pin, channel::ParseQueuePin(flags.Get(
                                                 "fuse-queue-pin", "auto")));
  options.auto_pin_deep_at = AutoPinDeepAt(disks.delayed);
  PVDISK_ASSIGN_OR_RETURN(options.spread,
                          flags.OneOf("fuse-spread", "on", "off"));
  FuseChannelFlags& given = request.given;
  given.fuse_threads = flags.Has("fuse-threads");
  given.queue_depth = flags.Has("fuse-queue-depth");
  given.queue_pin = flags.Has("fuse-queue-pin");
  given.huge_entries = flags.Has("fuse-huge-entries");
  given.spread = flags.Has("fuse-spread");
  PVDISK_ASSIGN_OR_RETURN(
      options.fuse_io,
      CheckFuseChannelOptions(options, given, payloads_in_place));
  return request;
}

uint32_t DefaultFuseQueueDepth(bool delayed, uint32_t ring_size) {
  if (!delayed) return channel::kDefaultUringQueueDepth;
  return std::clamp(ring_size, channel::kDefaultUringQueueDepth,
                    channel::kMaxUringQueueDepth);
}

unsigned AutoPinDeepAt(bool delayed) {
  return delayed ? kDelayedDeepAtOnce : channel::AutoPin::kDeepAtOnce;
}

absl::Status CheckFuseSpread(const FuseChannelOptions& options,
                             const FuseChannelFlags& given,
                             transport::Placement placement) {
  if (given.spread && options.spread &&
      options.fuse_io == channel::FuseIo::kUring &&
      placement != transport::Placement::kInline) {
    return absl::InvalidArgumentError(
        "--fuse-spread on moves replies between the FUSE queue threads of "
        "the inline placement; with backend threads (--placement "
        "backend-thread, or a flag that needs them) the backend threads "
        "reply, so leave --fuse-spread out or use --placement inline");
  }
  return absl::OkStatus();
}

bool SpreadApplies(const FuseChannelOptions& options,
                   transport::Placement placement, uint32_t queues) {
  return options.spread && options.fuse_io == channel::FuseIo::kUring &&
         placement == transport::Placement::kInline && queues > 1;
}

}  // namespace pvdisk::fuse
