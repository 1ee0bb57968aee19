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
#include "fuse/channel/channel_options.h"
#include "fuse/channel/ring_companion.h"
#include "fuse/protocol/handler.h"
#include "fuse/protocol/session.h"

namespace pvdisk::fuse::channel {

struct ServeOptions {
  std::string mountpoint;
  std::string mount_options;  // -o options (fsname=..., allow_other, ...)
  // Which channel and how (channel_options.h); fuse_io resolved (see
  // ResolveFuseIo).
  ChannelOptions channel;
  // kUring: work each uring queue's thread also does (the inline
  // placement's backends), and the submission room it needs per round.
  RingCompanions companions;
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
