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
// are refused; so is --fuse-io classic,
// --backend process (the backend is in another process), and disks with a
// delay= model: its timer wakes only a thread that sleeps in the engine's
// own Run(). (An rbd: disk's engine watches librbd's eventfd on the ring.)
// backend-thread: today's backend threads, whatever the FUSE channel; the
// notification experiments use it, since they need two sides.
// auto (the default): inline where the FUSE channel is uring, no flag
// asks for something inline cannot do and no disk is rbd:; backend-thread
// otherwise. rbd: disks measured the same in both placements
// (measured 2026-12-02), and with one
// backend thread a single engine collects every completion, where inline
// engines hand each other theirs through mailboxes.
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
// message ("--queues 4"), or empty. `cpus`: FUSE uring queues.
std::string FlagAgainstInline(const ParsedArgs& parsed,
                              const std::vector<fuse::DiskSpec>& disks,
                              const transport::TransportOptions& transport,
                              uint32_t cpus);

// Whether `disks` keep auto on backend-thread although inline could serve
// them (rbd: disks; see above).
bool AutoPrefersBackendThread(const std::vector<fuse::DiskSpec>& disks);

// `transport` (as the flags set it) changed for the inline placement with
// `cpus` FUSE queues.
transport::TransportOptions InlineTransport(
    const transport::TransportOptions& transport, uint32_t cpus);

// Decides the placement before --fuse-io is resolved: inline when asked, or
// under auto when `fuse_io` may become uring and no flag is against it.
// Refuses inline with --fuse-io classic or a flag against it (one line
// naming the flag and what to use instead).
absl::StatusOr<transport::Placement> ChoosePlacement(
    PlacementFlag wanted, fuse::channel::FuseIo fuse_io,
    const ParsedArgs& parsed, const std::vector<fuse::DiskSpec>& disks,
    const transport::TransportOptions& transport, uint32_t cpus);

}  // namespace pvdisk::cli
