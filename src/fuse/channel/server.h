// Serve(): mount, serve FUSE requests through a channel until told to stop,
// then shut down in order. Shared by pvdisk's Filesystem and by
// bench/fuse_floor, so both run on the same FUSE layer.
//
// Stopping: SIGINT, SIGTERM or SIGHUP (taken through a signalfd by the
// thread that called Serve(); pvdisk's other threads block all signals), or
// the mount going away (fusermount3 -u). Then, in this order: the channel
// stops taking requests, `drain` finishes every request in flight (their
// replies still reach the kernel), the channel closes, and the mount is
// detached.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "fuse/channel/queue_affinity.h"
#include "fuse/channel/uring_channel.h"
#include "fuse/channel/uring_support.h"
#include "fuse/protocol/handler.h"
#include "fuse/protocol/session.h"

namespace pvdisk::fuse::channel {

struct ServeOptions {
  std::string mountpoint;
  std::string mount_options;  // -o options (fsname=..., allow_other, ...)
  // kClassic or kUring (resolved: see ResolveFuseIo). With kUring, one
  // classic reader stays for what the kernel keeps on /dev/fuse.
  FuseIo fuse_io = FuseIo::kClassic;
  unsigned classic_threads = 4;  // workers reading /dev/fuse (classic)
  uint32_t queue_depth = kDefaultUringQueueDepth;  // entries per uring queue
  // kUring: work each uring queue's thread also does (the inline
  // placement's backends), and the submission room it needs per round.
  RingCompanionMaker companion;
  uint32_t companion_sq_entries = 0;
  // kUring: where the entries' payload buffers are (may be null).
  const PayloadArena* arena = nullptr;
  QueuePin queue_pin = QueuePin::kAuto;  // kUring: where queue threads run
  // kUring with companions: a queue thread that holds many requests sends
  // some replies out through the other queue threads (uring_channel.h).
  bool spread_entries = false;
  protocol::SessionOptions session;
};

struct ServeHooks {
  // Called once the mount exists; errors before it leave nothing mounted.
  std::function<void()> on_mounted;
  // Called after the channel stopped taking requests: must return once
  // every request handed to the handler has been answered.
  std::function<void()> drain;
};

absl::Status Serve(const ServeOptions& options, protocol::Handler* handler,
                   const ServeHooks& hooks);

}  // namespace pvdisk::fuse::channel
