#include "transport/transport_flags.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "transport/interrupt_handler.h"
#include "transport/protocol.h"
#include "transport/spin_window.h"

namespace pvdisk::transport {
namespace {

// --nvme-data and --irq-coalesce: only with --frontend nvme.
absl::Status ReadNvmeFlags(const FlagValues& flags, QueueOptions& queue) {
  const bool nvme = queue.protocol->name() == "nvme";
  for (std::string_view flag : {"nvme-data", "irq-coalesce"}) {
    if (flags.Has(flag) && !nvme) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", std::string(flag),
                       " is not allowed here: it needs --frontend nvme"));
    }
  }
  PVDISK_ASSIGN_OR_RETURN(bool prp, flags.OneOf("nvme-data", "prp", "sgl"));
  queue.nvme_data = prp ? DataPointerMode::kPrp : DataPointerMode::kSgl;
  if (!flags.Has("irq-coalesce")) return absl::OkStatus();
  const std::string value = flags.Get("irq-coalesce", "");
  const size_t comma = value.find(',');
  const absl::Status wrong = absl::InvalidArgumentError(absl::StrCat(
      "--irq-coalesce '", value,
      "' is not allowed: use THRESHOLD,TIME_US with THRESHOLD 1 to ",
      kMaxCoalesceThreshold, " and TIME_US 1 to ", kMaxCoalesceTimeUs));
  if (comma == std::string::npos) return wrong;
  absl::StatusOr<uint64_t> threshold = ParseWholeNumber(
      "irq-coalesce", value.substr(0, comma), 1, kMaxCoalesceThreshold);
  absl::StatusOr<uint64_t> time_us = ParseWholeNumber(
      "irq-coalesce", value.substr(comma + 1), 1, kMaxCoalesceTimeUs);
  if (!threshold.ok() || !time_us.ok()) return wrong;
  queue.irq_coalesce.threshold = static_cast<uint32_t>(*threshold);
  queue.irq_coalesce.time_us = static_cast<uint32_t>(*time_us);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TransportOptions> TransportOptionsFromFlags(
    const FlagValues& flags) {
  TransportOptions transport;
  PVDISK_ASSIGN_OR_RETURN(
      transport.queue.protocol,
      FindProtocol(std::string_view(flags.Get("frontend", "blkif"))));
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t ring_size,
      flags.Number("ring-size", kDefaultRingSize, kMinRingSize,
                   transport.queue.protocol->max_ring_size()));
  transport.queue.ring_size = static_cast<uint32_t>(ring_size);
  PVDISK_ASSIGN_OR_RETURN(uint64_t max_segments,
                          flags.Number("max-segments", kDefaultSegments,
                                       kMinSegments, kMaxSegments));
  transport.queue.max_segments = static_cast<uint32_t>(max_segments);
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t queues, flags.Number("queues", kDefaultQueues, 1, kMaxQueues));
  transport.queues = static_cast<uint32_t>(queues);
  PVDISK_ASSIGN_OR_RETURN(uint64_t threads, flags.Number("backend-threads", 1,
                                                         1, transport.queues));
  transport.backend_threads = static_cast<uint32_t>(threads);
  PVDISK_ASSIGN_OR_RETURN(
      transport.queue_map,
      ParseQueueMap(std::string_view(flags.Get("queue-map", "offset"))));
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t poll_us, flags.Number("poll-us", kDefaultPollUs, 0, kMaxPollUs));
  transport.backend.poll_us = static_cast<uint32_t>(poll_us);
  if (flags.Has("engine-max-inflight")) {
    PVDISK_ASSIGN_OR_RETURN(uint64_t cap, flags.Number("engine-max-inflight", 0,
                                                       1, kMaxEngineInflight));
    transport.backend.engine_max_inflight = static_cast<uint32_t>(cap);
  }
  PVDISK_ASSIGN_OR_RETURN(transport.queue.policy.merge,
                          flags.OneOf("merge", "on", "off"));
  PVDISK_ASSIGN_OR_RETURN(bool when_room,
                          flags.OneOf("dispatch", "when-room", "always"));
  transport.queue.policy.dispatch =
      when_room ? DispatchMode::kWhenRoom : DispatchMode::kAlways;
  PVDISK_ASSIGN_OR_RETURN(uint64_t plug_us,
                          flags.Number("plug-us", 0, 0, kMaxPlugUs));
  transport.queue.policy.plug_us = static_cast<uint32_t>(plug_us);
  PVDISK_ASSIGN_OR_RETURN(transport.queue.persistent,
                          flags.OneOf("persistent", "on", "off"));
  PVDISK_ASSIGN_OR_RETURN(bool event_idx,
                          flags.OneOf("notify", "event-idx", "always"));
  transport.queue.notify =
      event_idx ? NotifyMode::kEventIdx : NotifyMode::kAlways;
  PVDISK_RETURN_IF_ERROR(ReadNvmeFlags(flags, transport.queue));
  PVDISK_ASSIGN_OR_RETURN(
      transport.queue.irq,
      ParseInterruptMode(std::string_view(flags.Get("irq", "inline"))));
  PVDISK_RETURN_IF_ERROR(ValidateTransportOptions(transport));
  return transport;
}

}  // namespace pvdisk::transport
