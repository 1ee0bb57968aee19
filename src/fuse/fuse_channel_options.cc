#include "fuse/fuse_channel_options.h"

#include "absl/strings/str_cat.h"

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
