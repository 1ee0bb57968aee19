#include "transport/queue.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "transport/blkif_device_ring.h"
#include "transport/blkif_driver_ring.h"
#include "transport/blkif_format.h"

namespace pvdisk::transport {

absl::Status ValidateQueueOptions(const QueueOptions& options) {
  if (!std::has_single_bit(options.ring_size) ||
      options.ring_size < kMinRingSize || options.ring_size > kMaxRingSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ring-size ", options.ring_size,
                     " is not allowed: use a power of two from ", kMinRingSize,
                     " to ", kMaxRingSize));
  }
  if (options.max_segments < 1 ||
      options.max_segments > static_cast<uint32_t>(blkif::kMaxDirectSegments)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-segments ", options.max_segments,
                     " is not allowed: use 1 to ", blkif::kMaxDirectSegments));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Queue>> Queue::Create(
    const QueueOptions& options, std::unique_ptr<io::IoEngine> engine) {
  PVDISK_RETURN_IF_ERROR(ValidateQueueOptions(options));
  std::unique_ptr<Queue> queue(new Queue());

  // Layout: ring pages, then one chunk of max_segments pages per ring slot,
  // so a full ring never waits for data pages. A read keeps its chunks until
  // it is answered whole (the reply is sent from them), so the pool must
  // also hold the largest BlockIo at once, however small the ring.
  size_t ring_bytes = blkif::RingBytes(options.ring_size);
  uint64_t sectors_per_chunk = uint64_t{options.max_segments} * 8;
  uint32_t chunk_count = std::max<uint32_t>(
      options.ring_size,
      static_cast<uint32_t>((kMaxBlockIoSectors + sectors_per_chunk - 1) /
                            sectors_per_chunk));
  uint32_t data_pages = chunk_count * options.max_segments;
  size_t region_bytes = ring_bytes + size_t{data_pages} * blkif::kPageSize;
  PVDISK_ASSIGN_OR_RETURN(queue->region_,
                          SharedRegion::Create(options.name, region_bytes));
  PVDISK_ASSIGN_OR_RETURN(queue->front_mapping_, queue->region_->Map());
  PVDISK_ASSIGN_OR_RETURN(queue->back_mapping_, queue->region_->Map());
  PVDISK_ASSIGN_OR_RETURN(queue->kick_, EventFd::Create());
  PVDISK_ASSIGN_OR_RETURN(queue->irq_, EventFd::Create());

  uint8_t* front = queue->front_mapping_->base();
  uint8_t* back = queue->back_mapping_->base();
  // The driver ring initialises the shared header, so it comes first.
  auto driver_ring =
      std::make_unique<BlkifDriverRing>(front, options.ring_size);
  BlkifDeviceLimits limits;
  limits.disk_sectors = options.disk_sectors;
  limits.data_pages = data_pages;
  limits.max_segments = options.max_segments;
  limits.read_only = options.read_only;
  auto device_ring = std::make_unique<BlkifDeviceRing>(
      back, options.ring_size, back + ring_bytes, limits);

  queue->frontend_ = std::make_unique<FrontendQueue>(
      std::move(driver_ring), front + ring_bytes,
      ChunkPool(chunk_count, options.max_segments), options.ring_size,
      queue->kick_.get(), queue->irq_.get(), &queue->stats_);
  queue->backend_ = std::make_unique<BackendLoop>(
      std::move(device_ring), std::move(engine), options.ring_size,
      queue->kick_.get(), queue->irq_.get(), &queue->stats_);
  return queue;
}

Queue::~Queue() { Shutdown(); }

void Queue::Start() {
  backend_->Start();
  frontend_->Start();
}

void Queue::Shutdown() {
  if (!frontend_) return;
  frontend_->Drain();
  backend_->Stop();
  frontend_->Stop();
}

}  // namespace pvdisk::transport
