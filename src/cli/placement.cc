#include "cli/placement.h"

#include "absl/strings/str_cat.h"

namespace pvdisk::cli {

absl::StatusOr<PlacementFlag> ParsePlacement(std::string_view text) {
  if (text == "auto") return PlacementFlag::kAuto;
  if (text == "inline") return PlacementFlag::kInline;
  if (text == "backend-thread") return PlacementFlag::kBackendThread;
  return absl::InvalidArgumentError(
      absl::StrCat("--placement '", absl::string_view(text.data(), text.size()),
                   "' is not allowed: use auto, inline or backend-thread"));
}

std::string FlagAgainstInline(const ParsedArgs& parsed,
                              const std::vector<fuse::DiskSpec>& disks,
                              const transport::TransportOptions& transport,
                              uint32_t cpus) {
  if (parsed.Get("backend", "thread") == "process") {
    return "--backend process";
  }
  for (const fuse::DiskSpec& disk : disks) {
    // A delay's timer wakes only a thread that sleeps in its own Run().
    if (disk.delay) return absl::StrCat("--disk ", disk.path, ",delay=");
  }
  if (parsed.Has("queues") && transport.queues != cpus) {
    return absl::StrCat("--queues ", transport.queues);
  }
  if (parsed.Has("queue-map") &&
      transport.queue_map != transport::QueueMap::kCpu) {
    return absl::StrCat(
        "--queue-map ",
        std::string(transport::QueueMapName(transport.queue_map)));
  }
  if (parsed.Has("backend-threads")) {
    return absl::StrCat("--backend-threads ", transport.backend_threads);
  }
  if (transport.queue.irq == transport::InterruptMode::kThread) {
    return "--irq thread";
  }
  return "";
}

bool AutoPrefersBackendThread(const std::vector<fuse::DiskSpec>& disks) {
  for (const fuse::DiskSpec& disk : disks) {
    if (disk.rbd) return true;
  }
  return false;
}

transport::TransportOptions InlineTransport(
    const transport::TransportOptions& transport, uint32_t cpus) {
  transport::TransportOptions result = transport;
  result.placement = transport::Placement::kInline;
  result.queues = cpus;
  result.queue_map = transport::QueueMap::kCpu;
  result.backend_threads = 1;
  result.queue.irq = transport::InterruptMode::kInline;
  return result;
}

absl::StatusOr<transport::Placement> ChoosePlacement(
    PlacementFlag wanted, fuse::channel::FuseIo fuse_io,
    const ParsedArgs& parsed, const std::vector<fuse::DiskSpec>& disks,
    const transport::TransportOptions& transport, uint32_t cpus) {
  if (wanted == PlacementFlag::kBackendThread) {
    return transport::Placement::kBackendThread;
  }
  const bool may_be_uring = fuse_io != fuse::channel::FuseIo::kClassic;
  const std::string against = FlagAgainstInline(parsed, disks, transport, cpus);
  if (wanted == PlacementFlag::kAuto) {
    return may_be_uring && against.empty() && !AutoPrefersBackendThread(disks)
               ? transport::Placement::kInline
               : transport::Placement::kBackendThread;
  }
  if (!may_be_uring) {
    return absl::InvalidArgumentError(
        "--placement inline needs --fuse-io uring (or auto): the FUSE "
        "uring queues' threads are what drives the disk queues; with "
        "--fuse-io classic use --placement backend-thread");
  }
  if (!against.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        against,
        " does not go with --placement inline, where each FUSE queue's "
        "thread drives one queue per disk (",
        cpus,
        " queues, --queue-map cpu, no backend threads, --irq inline); drop "
        "it or use --placement backend-thread"));
  }
  return transport::Placement::kInline;
}

}  // namespace pvdisk::cli
