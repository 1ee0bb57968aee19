// FuseChannelOptions: which FUSE channel serves a mount and how (pvdisk
// mount's --fuse-io, --fuse-threads, --fuse-queue-depth, --fuse-huge-entries,
// --fuse-queue-pin, --fuse-spread), and the checks of what the flags ask.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuse/channel/payload_arena.h"
#include "fuse/channel/queue_affinity.h"
#include "fuse/channel/uring_channel.h"
#include "fuse/channel/uring_support.h"
#include "transport/transport.h"

namespace pvdisk::fuse {

// FUSE worker threads (readers of /dev/fuse): pvdisk mount's --fuse-threads.
inline constexpr unsigned kDefaultFuseThreads = 4;
inline constexpr unsigned kMaxFuseThreads = 64;

// Which FUSE channel serves the mount (see fuse/channel/server.h).
struct FuseChannelOptions {
  channel::FuseIo fuse_io = channel::FuseIo::kClassic;  // resolved
  uint32_t queue_depth = channel::kDefaultUringQueueDepth;
  // kUring: the entries' payload buffers, when the disks lend them to their
  // backends (payload_arena.h); null: the channel maps its own. Not owned.
  const channel::PayloadArena* arena = nullptr;
  // kUring with an arena: the entries per queue whose payloads are in
  // huge pages (--fuse-huge-entries; payload_arena.h says why).
  uint32_t huge_entries = channel::kDefaultHugeEntries;
  channel::QueuePin queue_pin = channel::QueuePin::kAuto;  // kUring
  // kUring with the inline placement: --fuse-spread (uring_channel.h).
  bool spread = false;
};

// Which of the channel's flags the command line gave: giving one asks for
// the channel it belongs to, whatever its value.
struct FuseChannelFlags {
  bool fuse_threads = false;
  bool queue_depth = false;
  bool queue_pin = false;
  bool huge_entries = false;
  bool spread = false;
};

// Checks `options` as the flags set them (fuse_io as asked: auto, uring or
// classic; ranges already parsed) against each other; `payloads_in_place`:
// whether the rings read into and write from the FUSE payloads themselves
// (--persistent on and --backend thread). Returns the channel the flags ask
// for: --fuse-threads turns auto into classic. Refuses, in one line naming
// the flag and what is allowed: more huge entries than a queue has,
// --fuse-huge-entries where payloads are copied, --fuse-threads with uring,
// and a uring queue flag with classic.
absl::StatusOr<channel::FuseIo> CheckFuseChannelOptions(
    const FuseChannelOptions& options, const FuseChannelFlags& given,
    bool payloads_in_place);

// Once the placement is decided: --fuse-spread on (given) needs the inline
// placement on the uring channel (`options.fuse_io` resolved), where the
// queue threads carry the I/O themselves.
absl::Status CheckFuseSpread(const FuseChannelOptions& options,
                             const FuseChannelFlags& given,
                             transport::Placement placement);

}  // namespace pvdisk::fuse
