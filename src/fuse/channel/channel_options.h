// ChannelOptions: which FUSE channel serves a mount and how, as pvdisk
// mount's FUSE flags set them (--fuse-io, --fuse-threads,
// --fuse-queue-depth, --fuse-huge-entries, --fuse-queue-pin,
// --fuse-spread). One struct carries each value from the command line to
// the code that uses it: the checks (fuse/fuse_channel_options.h), Serve
// (server.h), the uring channel (uring_channel.h) and the stats header
// (fuse/disk.h).
#pragma once

#include <cstdint>

#include "fuse/channel/payload_arena.h"
#include "fuse/channel/queue_affinity.h"
#include "fuse/channel/uring_support.h"

namespace pvdisk::fuse::channel {

// Entries per uring queue. Every entry has a 1 MiB payload buffer, but only
// the pages a request touches become resident, and the kernel reuses the
// most recently committed entry first, so a deep queue costs address space,
// not memory. 128: an iodepth-64 job (or two of 32) on one CPU still has
// all its requests on the ring.
inline constexpr uint32_t kDefaultUringQueueDepth = 128;
inline constexpr uint32_t kMaxUringQueueDepth = 1024;

// Workers reading /dev/fuse on the classic channel (--fuse-threads).
inline constexpr unsigned kDefaultClassicThreads = 4;
inline constexpr unsigned kMaxClassicThreads = 64;

struct ChannelOptions {
  // kClassic or kUring once resolved (ResolveFuseIo); kAuto as asked.
  FuseIo fuse_io = FuseIo::kClassic;
  // kClassic: workers reading /dev/fuse (--fuse-threads). With kUring one
  // classic reader stays for what the kernel keeps on /dev/fuse.
  unsigned classic_threads = kDefaultClassicThreads;
  uint32_t queue_depth = kDefaultUringQueueDepth;  // kUring: entries a queue
  // kUring: the entries' payload buffers, when the disks lend them to their
  // backends (payload_arena.h); null: each queue maps its own. Not owned.
  const PayloadArena* arena = nullptr;
  // kUring with an arena: the entries per queue whose payloads are in huge
  // pages, as asked (--fuse-huge-entries; the arena says how many are).
  uint32_t huge_entries = kDefaultHugeEntries;
  QueuePin queue_pin = QueuePin::kAuto;  // kUring: where queue threads run
  // kUring with kAuto: FUSE requests held at once that make a round deep
  // (AutoPin; fuse::AutoPinDeepAt sets it from the disks).
  unsigned auto_pin_deep_at = AutoPin::kDeepAtOnce;
  // kUring: queue threads at depth hand replies to each other
  // (spread_policy.h). As asked until the placement is decided, then
  // whether it applies (fuse::SpreadApplies): only the inline placement's
  // queue threads make the replies that spread.
  bool spread = false;
};

}  // namespace pvdisk::fuse::channel
