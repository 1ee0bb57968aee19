#include "transport/queue.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "transport/blkif/protocol.h"
#include "transport/device_side.h"
#include "transport/memory_budget.h"

namespace pvdisk::transport {
const Protocol& ProtocolOf(const QueueOptions& options) {
  return options.protocol != nullptr ? *options.protocol : BlkifProtocol();
}

RingConfig RingConfigOf(const QueueOptions& options, stats::QueueStats* stats) {
  RingConfig config(options.notify);
  config.data_pointer = options.nvme_data;
  config.coalesce = options.irq_coalesce;
  config.stats = stats;
  return config;
}

absl::Status ValidateQueueOptions(const QueueOptions& options) {
  const Protocol& protocol = ProtocolOf(options);
  if (!std::has_single_bit(options.ring_size) ||
      options.ring_size < kMinRingSize ||
      options.ring_size > protocol.max_ring_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ring-size ", options.ring_size,
        " is not allowed: use a power of two from ", kMinRingSize, " to ",
        protocol.max_ring_size(), " (--frontend ",
        absl::string_view(protocol.name().data(), protocol.name().size()),
        ")"));
  }
  if (options.max_segments < kMinSegments ||
      options.max_segments > kMaxSegments) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-segments ", options.max_segments, " is not allowed: use ",
        kMinSegments, " (direct requests only) to ", kMaxSegments,
        " (indirect requests)"));
  }
  const IrqCoalesce& coalesce = options.irq_coalesce;
  if (coalesce.threshold > kMaxCoalesceThreshold ||
      coalesce.time_us > kMaxCoalesceTimeUs ||
      (coalesce.threshold == 0) != (coalesce.time_us == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--irq-coalesce ", coalesce.threshold, ",", coalesce.time_us,
        " is not allowed: use THRESHOLD,TIME_US with THRESHOLD 1 to ",
        kMaxCoalesceThreshold, " and TIME_US 1 to ", kMaxCoalesceTimeUs));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Queue>> Queue::Create(
    const QueueOptions& options) {
  PVDISK_RETURN_IF_ERROR(ValidateQueueOptions(options));
  if (!options.lent.empty() && !options.persistent) {
    return absl::InvalidArgumentError(
        "lent memory needs persistent grants: per-request grants map pages "
        "of the shared region only");
  }
  std::unique_ptr<Queue> queue(new Queue());
  queue->options_ = options;

  // Region: ring pages, the data pool, then each ring id's table pages,
  // sized by the same function the memory budget uses.
  const Protocol& protocol = ProtocolOf(options);
  queue->protocol_ = &protocol;
  const QueueMemory memory = QueueMemoryOf(options);
  FrontendLayout& layout = queue->layout_;
  layout.ring_slots = options.ring_size;
  layout.max_segments = options.max_segments;
  layout.pool_pages = memory.pool_pages;
  layout.table_pages_per_request = memory.table_pages_per_request;
  layout.lent = options.lent;
  layout.lent_first_page =
      LentFirstPage(memory.pool_pages + memory.table_pages);
  size_t ring_bytes = memory.ring_bytes;
  queue->ring_pages_ = static_cast<uint32_t>(ring_bytes / 4096);
  size_t region_bytes = memory.region_bytes;

  PVDISK_ASSIGN_OR_RETURN(queue->shared_stats_,
                          SharedStats::Create(options.name + "-stats"));
  stats::QueueStats* stats = &queue->shared_stats_->stats();
  PVDISK_ASSIGN_OR_RETURN(queue->region_,
                          SharedRegion::Create(options.name, region_bytes));
  PVDISK_ASSIGN_OR_RETURN(queue->front_mapping_, queue->region_->Map());
  PVDISK_ASSIGN_OR_RETURN(queue->kick_, EventFd::Create());
  PVDISK_ASSIGN_OR_RETURN(queue->irq_, EventFd::Create());

  uint8_t* front = queue->front_mapping_->base();
  // The driver ring initialises the shared ring, so it comes first.
  std::unique_ptr<DriverRing> driver_ring = protocol.NewDriverRing(
      front, options.ring_size, front + ring_bytes, RingConfigOf(options));
  PVDISK_ASSIGN_OR_RETURN(
      DeviceSide device,
      AttachDeviceSide(options, queue->region_.get(), stats));
  queue->back_mapping_ = std::move(device.mapping);
  queue->grants_ = std::move(device.grants);
  queue->device_ring_ = std::move(device.ring);
  queue->frontend_ = std::make_unique<FrontendQueue>(
      std::move(driver_ring), front + ring_bytes, layout, options.policy,
      queue->kick_.get(), queue->irq_.get(), stats);
  queue->trace_ =
      std::make_unique<trace::QueueTrace>(static_cast<uint16_t>(options.index));
  queue->frontend_->SetTrace(queue->trace_.get());
  return queue;
}

Queue::~Queue() = default;

BackendQueue Queue::ForBackend(int buffer_index) {
  BackendQueue backend;
  backend.ring = device_ring_.get();
  backend.grants = grants_.get();
  backend.kick = kick_.get();
  backend.irq = irq_.get();
  if (options_.irq == InterruptMode::kInline) {
    backend.inline_interrupts = frontend_.get();
  }
  backend.frontend = frontend_.get();
  backend.stats = &stats();
  backend.trace = trace_.get();
  backend.ring_slots = options_.ring_size;
  backend.buffer_index = buffer_index;
  backend.disk = options_.disk;
  backend.index = options_.index;
  return backend;
}

iovec Queue::PoolBuffer() const {
  if (!options_.persistent) return iovec{nullptr, 0};
  size_t ring_bytes = protocol_->RingBytes(options_.ring_size);
  return iovec{back_mapping_->base() + ring_bytes,
               size_t{layout_.pool_pages} * 4096};
}

void Queue::ReconnectRing() {
  uint8_t* front = front_mapping_->base();
  size_t ring_bytes = protocol_->RingBytes(options_.ring_size);
  frontend_->Reconnect([&] {
    return protocol_->NewDriverRing(front, options_.ring_size,
                                    front + ring_bytes, RingConfigOf(options_));
  });
}

}  // namespace pvdisk::transport
