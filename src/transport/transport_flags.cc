#include "transport/transport_flags.h"

#include "base/status_macros.h"
#include "transport/interrupt_handler.h"
#include "transport/protocol.h"

namespace pvdisk::transport {

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
  PVDISK_ASSIGN_OR_RETURN(
      transport.queue.irq,
      ParseInterruptMode(std::string_view(flags.Get("irq", "inline"))));
  PVDISK_RETURN_IF_ERROR(ValidateTransportOptions(transport));
  return transport;
}

}  // namespace pvdisk::transport
