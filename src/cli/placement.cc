#include "cli/placement.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "transport/memory_budget.h"

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
                              const transport::TransportOptions& transport,
                              uint32_t cpus) {
  if (parsed.Get("backend", "thread") == "process") {
    return "--backend process";
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

absl::StatusOr<transport::TransportOptions> DecidePlacement(
    const PlacementInput& input) {
  const uint32_t cpus = input.cpus;
  bool want_inline = false;
  switch (input.wanted) {
    case PlacementFlag::kBackendThread:
      break;
    case PlacementFlag::kAuto:
      want_inline = input.fuse_io == fuse::channel::FuseIo::kUring &&
                    input.against_inline.empty();
      break;
    case PlacementFlag::kInline:
      if (input.fuse_io_asked == fuse::channel::FuseIo::kClassic) {
        return absl::InvalidArgumentError(
            "--placement inline needs --fuse-io uring (or auto): the FUSE "
            "uring queues' threads are what drives the disk queues; with "
            "--fuse-io classic use --placement backend-thread");
      }
      if (!input.against_inline.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            input.against_inline,
            " does not go with --placement inline, where each FUSE queue's "
            "thread drives one queue per disk (",
            cpus,
            " queues, --queue-map cpu, no backend threads, --irq inline); "
            "drop it or use --placement backend-thread"));
      }
      if (input.fuse_io != fuse::channel::FuseIo::kUring) {
        return absl::InvalidArgumentError(
            "--placement inline needs FUSE over io_uring, which this kernel "
            "does not offer (see --fuse-io); use --placement backend-thread");
      }
      want_inline = true;
      break;
  }
  if (want_inline) {
    transport::TransportOptions inline_transport =
        InlineTransport(input.transport, cpus);
    PVDISK_RETURN_IF_ERROR(
        transport::ValidateTransportOptions(inline_transport));
    absl::Status fits = transport::CheckMemoryBudget(
        inline_transport, input.uring_engine, input.disks, input.memory_budget);
    if (fits.ok()) return inline_transport;
    // Asked for, it must fit; under auto one queue per CPU is too much
    // here, so backend threads serve.
    if (input.wanted == PlacementFlag::kInline) return fits;
  }
  transport::TransportOptions result = input.transport;
  result.placement = transport::Placement::kBackendThread;
  PVDISK_RETURN_IF_ERROR(transport::ValidateTransportOptions(result));
  PVDISK_RETURN_IF_ERROR(transport::CheckMemoryBudget(
      result, input.uring_engine, input.disks, input.memory_budget));
  return result;
}

}  // namespace pvdisk::cli
