#include "transport/process/backend_setup.h"

#include "absl/strings/str_cat.h"
#include "transport/process/wire.h"
#include "transport/transport.h"

namespace pvdisk::transport::process {
namespace {

absl::Status Malformed(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("malformed ", what, " packet from the peer"));
}

}  // namespace

std::string EncodeSetup(const BackendSetup& setup) {
  WireWriter out;
  const QueueOptions& queue = setup.queue;
  out.PutString(ProtocolOf(queue).name());
  out.PutU64(queue.ring_size);
  out.PutU64(queue.max_segments);
  out.PutU64(queue.persistent ? 1 : 0);
  out.PutU64(queue.notify == NotifyMode::kEventIdx ? 1 : 0);
  out.PutU64(queue.nvme_data == DataPointerMode::kSgl ? 1 : 0);
  out.PutU64(queue.irq_coalesce.threshold);
  out.PutU64(queue.irq_coalesce.time_us);
  out.PutU64(queue.disk_sectors);
  out.PutU64(queue.read_only ? 1 : 0);
  out.PutString(queue.serial);
  out.PutString(queue.name);
  out.PutString(queue.disk);
  out.PutU64(setup.queues);
  out.PutU64(setup.backend_threads);
  out.PutU64(setup.backend.engine_max_inflight);
  out.PutU64(setup.backend.poll_us);
  out.PutString(setup.engine_config);
  out.PutU64(setup.fence_byte);
  out.PutU64(setup.image_files);
  out.PutU64(static_cast<uint64_t>(setup.log_target));
  out.PutU64(setup.other_files);
  return out.data();
}

absl::StatusOr<BackendSetup> DecodeSetup(std::string_view payload) {
  WireReader in(payload);
  BackendSetup setup;
  QueueOptions& queue = setup.queue;
  std::string protocol;
  uint64_t sgl, coalesce_threshold, coalesce_us;
  uint64_t ring_size, max_segments, persistent, event_idx, read_only, queues,
      threads, max_inflight, poll_us, image_files, log_target, other_files;
  if (!in.GetString(&protocol) || !in.GetU64(&ring_size) ||
      !in.GetU64(&max_segments) || !in.GetU64(&persistent) ||
      !in.GetU64(&event_idx) || !in.GetU64(&sgl) ||
      !in.GetU64(&coalesce_threshold) || !in.GetU64(&coalesce_us) ||
      coalesce_threshold > kMaxCoalesceThreshold ||
      coalesce_us > kMaxCoalesceTimeUs || !in.GetU64(&queue.disk_sectors) ||
      !in.GetU64(&read_only) || !in.GetString(&queue.serial) ||
      !in.GetString(&queue.name) || !in.GetString(&queue.disk) ||
      !in.GetU64(&queues) || !in.GetU64(&threads) ||
      !in.GetU64(&max_inflight) || !in.GetU64(&poll_us) ||
      !in.GetString(&setup.engine_config) || !in.GetU64(&setup.fence_byte) ||
      !in.GetU64(&image_files) || !in.GetU64(&log_target) ||
      log_target > static_cast<uint64_t>(LogTarget::kSyslog) ||
      !in.GetU64(&other_files)) {
    return Malformed("setup");
  }
  absl::StatusOr<const Protocol*> found = FindProtocol(protocol);
  if (!found.ok()) return found.status();
  queue.protocol = *found;
  queue.ring_size = static_cast<uint32_t>(ring_size);
  queue.max_segments = static_cast<uint32_t>(max_segments);
  queue.persistent = persistent != 0;
  queue.notify = event_idx != 0 ? NotifyMode::kEventIdx : NotifyMode::kAlways;
  queue.nvme_data = sgl != 0 ? DataPointerMode::kSgl : DataPointerMode::kPrp;
  queue.irq_coalesce.threshold = static_cast<uint32_t>(coalesce_threshold);
  queue.irq_coalesce.time_us = static_cast<uint32_t>(coalesce_us);
  queue.read_only = read_only != 0;
  setup.queues = static_cast<uint32_t>(queues);
  setup.backend_threads = static_cast<uint32_t>(threads);
  setup.backend.engine_max_inflight = static_cast<uint32_t>(max_inflight);
  setup.backend.poll_us = static_cast<uint32_t>(poll_us);
  if (image_files > kMaxImageFiles || other_files > kMaxOtherFiles) {
    return Malformed("setup");
  }
  setup.image_files = static_cast<uint32_t>(image_files);
  setup.other_files = static_cast<uint32_t>(other_files);
  setup.log_target = static_cast<LogTarget>(log_target);
  if (setup.queues < 1 || setup.queues > kMaxQueues ||
      setup.backend_threads < 1 || setup.backend_threads > setup.queues) {
    return Malformed("setup");
  }
  absl::Status valid = ValidateQueueOptions(queue);
  if (!valid.ok()) return valid;
  return setup;
}

std::string EncodeReady(const BackendReady& ready) {
  WireWriter out;
  out.PutU64(ready.ok ? 1 : 0);
  out.PutString(ready.error);
  out.PutString(ready.engine_mode);
  out.PutU64(ready.engine_depth);
  out.PutU64(ready.fixed_buffers ? 1 : 0);
  out.PutString(ready.writer);
  return out.data();
}

absl::StatusOr<BackendReady> DecodeReady(std::string_view payload) {
  WireReader in(payload);
  BackendReady ready;
  uint64_t ok, depth, fixed;
  if (!in.GetU64(&ok) || !in.GetString(&ready.error) ||
      !in.GetString(&ready.engine_mode) || !in.GetU64(&depth) ||
      !in.GetU64(&fixed) || !in.GetString(&ready.writer)) {
    return Malformed("ready");
  }
  ready.ok = ok != 0;
  ready.engine_depth = static_cast<uint32_t>(depth);
  ready.fixed_buffers = fixed != 0;
  return ready;
}

std::string EncodeControl(const ControlMessage& message) {
  WireWriter out;
  out.PutU64(message.seq);
  out.PutU64(static_cast<uint64_t>(message.body.status().code()));
  out.PutString(message.body.ok()
                    ? *message.body
                    : std::string(message.body.status().message()));
  return out.data();
}

absl::StatusOr<ControlMessage> DecodeControl(std::string_view payload) {
  WireReader in(payload);
  ControlMessage message;
  uint64_t code;
  std::string text;
  if (!in.GetU64(&message.seq) || !in.GetU64(&code) || !in.GetString(&text) ||
      code > static_cast<uint64_t>(absl::StatusCode::kUnauthenticated)) {
    return Malformed("control");
  }
  if (code == 0) {
    message.body = std::move(text);
  } else {
    message.body = absl::Status(static_cast<absl::StatusCode>(code), text);
  }
  return message;
}

}  // namespace pvdisk::transport::process
