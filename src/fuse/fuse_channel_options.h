// FuseChannelOptions: which FUSE channel serves a mount and how (pvdisk
// mount's --fuse-io, --fuse-threads, --fuse-queue-depth, --fuse-huge-entries,
// --fuse-queue-pin, --fuse-spread), and the checks of what the flags ask.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/flag_values.h"
#include "fuse/channel/channel_options.h"
#include "transport/transport.h"

namespace pvdisk::fuse {

struct DiskSpec;  // fuse/disk.h

// FUSE worker threads (readers of /dev/fuse): pvdisk mount's --fuse-threads.
inline constexpr unsigned kDefaultFuseThreads = channel::kDefaultClassicThreads;
inline constexpr unsigned kMaxFuseThreads = channel::kMaxClassicThreads;

// Which FUSE channel serves the mount and how (channel/channel_options.h).
using FuseChannelOptions = channel::ChannelOptions;

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

// What a mount's disks make of the channel's defaults: whether one of
// them models a device latency (--disk ...,delay=), and their rings' slots
// (--ring-size).
struct ChannelDefaultsInput {
  bool delayed = false;
  uint32_t ring_size = 0;
};
ChannelDefaultsInput ChannelDefaultsFor(const std::vector<DiskSpec>& disks,
                                        uint32_t ring_size);

// The FUSE channel as `flags` set it (--fuse-threads, --fuse-io,
// --fuse-queue-depth, --fuse-huge-entries, --fuse-queue-pin, --fuse-spread,
// each against its range or words), checked by CheckFuseChannelOptions:
// `options.fuse_io` is the channel asked for (auto, uring or classic), and
// `given` says which of the flags were given (for CheckFuseSpread). The
// defaults that follow the disks (DefaultFuseQueueDepth, AutoPinDeepAt) are
// applied here from `disks`.
struct FuseChannelRequest {
  FuseChannelOptions options;
  FuseChannelFlags given;
};
absl::StatusOr<FuseChannelRequest> FuseChannelFromFlags(
    const FlagValues& flags, bool payloads_in_place,
    const ChannelDefaultsInput& disks = {});

// The FUSE uring queue depth when --fuse-queue-depth is not given: the
// default (channel::kDefaultUringQueueDepth), or, when a disk models a
// device latency (`delayed`: --disk ...,delay=), enough entries for its
// ring's `ring_size` slots, up to channel::kMaxUringQueueDepth. A model
// holds requests inside pvdisk for its whole delay, and a reader on one
// CPU reaches one FUSE queue: with fewer entries than the ring has slots,
// FUSE's queue, not the ring or an engine cap, bounds what is in flight.
// Entries cost address space, not memory (channel_options.h).
uint32_t DefaultFuseQueueDepth(bool delayed, uint32_t ring_size);

// What --fuse-queue-pin auto counts as requests coming several at once
// (channel::AutoPin): two held at once, or, when a disk models a device
// latency (`delayed`), kDelayedDeepAtOnce. The auto policy moves a queue
// thread off its callers' CPU while requests come several at once, so
// that two CPUs work. A delay model holds every request for its delay, so
// two or more are held whenever the caller's iodepth is, even at a few
// thousand requests a second, where the queue thread's work is small beside
// the delay and what the caller sees beyond it is wake-ups: off its CPU,
// each cycle's release and submission cross CPUs, and a halted vCPU woken
// from the other answered 45-60 us late where a local wake-up took 3-5 us
// (perf sched, delay=500 at fio iodepth 4).
inline constexpr unsigned kDelayedDeepAtOnce = 32;
unsigned AutoPinDeepAt(bool delayed);

// Once the placement is decided: --fuse-spread on (given) needs the inline
// placement on the uring channel (`options.fuse_io` resolved), where the
// queue threads carry the I/O themselves.
absl::Status CheckFuseSpread(const FuseChannelOptions& options,
                             const FuseChannelFlags& given,
                             transport::Placement placement);

// Whether spreading applies to the mount: asked (`options.spread`), on the
// uring channel (`options.fuse_io` resolved), with the inline placement
// (whose queue threads make the replies that spread) and `queues` (FUSE
// uring queues) of at least two to spread between. The value the channel
// and the stats header take.
bool SpreadApplies(const FuseChannelOptions& options,
                   transport::Placement placement, uint32_t queues);

}  // namespace pvdisk::fuse
