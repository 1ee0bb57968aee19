// pvdisk mount's --placement: where each queue's backend runs
// (transport::Placement), and what that means for the queue flags.
//
// inline: the thread of FUSE uring queue q drives queue q of every disk,
// front and back (fuse/inline_driver.h). So a disk has one queue per FUSE
// queue (one per possible CPU), requests go to the queue of their CPU
// (--queue-map cpu), there are no backend threads to count, and interrupts
// run inline; --poll-us is the queue thread's spin for its I/O's completion
// at depth below 2. Flags that ask otherwise (--queues N for another N,
// --queue-map, --backend-threads, --irq thread) make no sense with it and
// are refused; so is --fuse-io classic and
// --backend process (the backend is in another process). No --disk option
// is: an rbd: disk's engine watches librbd's eventfd on the ring, and a
// delay= model's timer is a timeout on the ring (io/ring_timer.h).
// backend-thread: today's backend threads, whatever the FUSE channel; the
// notification experiments use it, since they need two sides.
// auto (the default): inline where the FUSE channel is uring and no flag
// asks for something inline cannot do; backend-thread otherwise. rbd: disks
// included: inline serves them as fast or faster than backend threads on
// every job of bench/compare --rbd
// (docs/perf/rbd-placements-2026-12-05.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/args.h"
#include "fuse/channel/uring_support.h"
#include "fuse/disk.h"
#include "transport/transport.h"

namespace pvdisk::cli {

enum class PlacementFlag { kAuto, kInline, kBackendThread };

absl::StatusOr<PlacementFlag> ParsePlacement(std::string_view text);

// The first flag of `parsed` that inline cannot honour, as the words of a
// message ("--queues 4"), or empty. `cpus`: FUSE uring queues. No --disk
// option is against inline.
std::string FlagAgainstInline(const ParsedArgs& parsed,
                              const transport::TransportOptions& transport,
                              uint32_t cpus);

// `transport` (as the flags set it) changed for the inline placement with
// `cpus` FUSE queues.
transport::TransportOptions InlineTransport(
    const transport::TransportOptions& transport, uint32_t cpus);

// What the placement is decided from: the checked flags, the FUSE channel
// the kernel gave, and the memory budget the result must fit.
struct PlacementInput {
  PlacementFlag wanted = PlacementFlag::kAuto;  // --placement
  // --fuse-io as asked (classic when --fuse-threads asked for it), and as
  // resolved for this kernel (uring or classic).
  fuse::channel::FuseIo fuse_io_asked = fuse::channel::FuseIo::kAuto;
  fuse::channel::FuseIo fuse_io = fuse::channel::FuseIo::kClassic;
  // The first flag inline cannot honour (FlagAgainstInline), or empty.
  std::string against_inline;
  // The transport as the flags set it: what the backend-thread placement
  // runs with.
  transport::TransportOptions transport;
  uint32_t cpus = 1;  // FUSE uring queues: one per possible CPU
  // --max-memory, and what transport::CheckMemoryBudget weighs against it.
  uint64_t memory_budget = 0;
  bool uring_engine = true;
  uint32_t disks = 1;
};

// The one place the placement is decided; returns the transport the mount
// runs with (its `placement` says which). Inline when asked, or under auto
// when the channel is uring, no flag is against it, no disk prefers backend
// threads and one queue per CPU fits the memory budget; backend threads
// otherwise. Refuses, with one line naming what is wrong and what to use:
// inline with --fuse-io classic, with a flag against it, or on a kernel
// without FUSE over io_uring; and a result over the memory budget.
absl::StatusOr<transport::TransportOptions> DecidePlacement(
    const PlacementInput& input);

}  // namespace pvdisk::cli
