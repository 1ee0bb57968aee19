// Queue: one queue of a disk, wired together: a shared region with the ring
// and the data pages, a kick and an interrupt eventfd, the frontend (driver)
// side, the backend's view of the ring (DeviceRing and GrantMapper), and the
// queue's counters. A BackendLoop (see transport.h) drives the device side.
// The ring protocol comes from QueueOptions (see protocol.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stats/queue_stats.h"
#include "trace/queue_trace.h"
#include "transport/backend_loop.h"
#include "transport/device_ring.h"
#include "transport/event_fd.h"
#include "transport/frontend_queue.h"
#include "transport/grant_mapper.h"
#include "transport/interrupt_handler.h"
#include "transport/lent_memory.h"
#include "transport/protocol.h"
#include "transport/ring_request.h"
#include "transport/shared_region.h"
#include "transport/shared_stats.h"

namespace pvdisk::transport {

inline constexpr uint32_t kMinRingSize = 32;
inline constexpr uint32_t kDefaultRingSize = 256;
inline constexpr uint32_t kMinSegments = 11;
inline constexpr uint32_t kMaxSegments = 4096;
inline constexpr uint32_t kDefaultSegments = 256;
// The largest BlockIo a queue must take whole: a 1 MiB FUSE request (the
// kernel's max_pages = 256) plus one page for an unaligned start or end.
inline constexpr uint64_t kMaxBlockIoSectors = (1 << 20) / 512 + 8;
// --irq-coalesce's ranges: NVMe's Aggregation Threshold (0's based, 8 bits)
// and Aggregation Time (255 units of 100 us).
inline constexpr uint32_t kMaxCoalesceThreshold = 256;
inline constexpr uint32_t kMaxCoalesceTimeUs = 25500;

struct QueueOptions {
  std::string name;  // for the memfd, e.g. "pvdisk-disk0.img-q0"
  // For log lines (base/event_log.h) and traces: the disk's file name in the
  // mount and the queue's index (set by Transport::Create).
  std::string disk;
  uint32_t index = 0;
  // The ring protocol; null means blkif.
  const Protocol* protocol = nullptr;
  // Ring entries; a power of two from 32 to the protocol's maximum.
  uint32_t ring_size = kDefaultRingSize;
  // Data pages per ring request: 11 = direct requests only; more = indirect
  // requests with up to 8 indirect pages of 512 segments.
  uint32_t max_segments = kDefaultSegments;
  bool persistent = true;  // persistent grants (see grant_mapper.h)
  NotifyMode notify = NotifyMode::kEventIdx;
  // The nvme frontend's data pointers (--nvme-data) and interrupt
  // coalescing (--irq-coalesce); other protocols refuse them.
  DataPointerMode nvme_data = DataPointerMode::kPrp;
  IrqCoalesce irq_coalesce;
  // Where the frontend's interrupt handler runs (see interrupt_handler.h).
  InterruptMode irq = InterruptMode::kInline;
  uint64_t disk_sectors = 0;
  bool read_only = false;
  std::string serial;  // for protocols that can ask for it (virtio GET_ID)
  // Staging queue: merging, dispatch policy, plugging.
  QueuePolicy policy;
  // Memory the frontend may grant directly (lent_memory.h); must outlive
  // the queue. Only with persistent grants and an in-process backend.
  LentMemory lent;
};

// Checks ring_size and max_segments; the message names the flag and the
// allowed range.
absl::Status ValidateQueueOptions(const QueueOptions& options);

// The ring protocol of `options`: options.protocol, or blkif when unset.
const Protocol& ProtocolOf(const QueueOptions& options);
// What the rings of `options` are built with; the device side counts into
// `stats` (may be null).
RingConfig RingConfigOf(const QueueOptions& options,
                        stats::QueueStats* stats = nullptr);

class Queue {
 public:
  // Builds the queue. Its threads (completion thread, and the BackendLoop
  // that will serve it) do not run yet.
  static absl::StatusOr<std::unique_ptr<Queue>> Create(
      const QueueOptions& options);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  FrontendQueue& frontend() { return *frontend_; }
  stats::QueueStats& stats() { return shared_stats_->stats(); }
  // What `pvdisk trace` records of this queue (trace/queue_trace.h).
  trace::QueueTrace& trace() { return *trace_; }

  // How a BackendLoop reaches this queue; `buffer_index` is the engine
  // buffer that will hold the data pages, or -1.
  BackendQueue ForBackend(int buffer_index);
  // The backend's mapping of the data pool, for the engine to register as a
  // fixed buffer. Empty when grants are not persistent.
  iovec PoolBuffer() const;

  uint32_t pool_pages() const { return layout_.pool_pages; }
  const Protocol& protocol() const { return *protocol_; }
  uint32_t ring_pages() const { return ring_pages_; }
  // The size of the shared region (memfd) really allocated: what
  // QueueMemoryOf() (memory_budget.h) computed.
  size_t region_bytes() const { return region_->size(); }

  // What a backend in another process receives (process/backend_host.h):
  // the region, the counters, the kick and the interrupt eventfd.
  const QueueOptions& options() const { return options_; }
  const SharedRegion& region() const { return *region_; }
  const SharedStats& shared_stats() const { return *shared_stats_; }
  EventFd& kick() { return *kick_; }
  EventFd& irq() { return *irq_; }

  // After the backend serving this queue died: re-initialises the ring and
  // has the frontend write every request the backend had not answered into
  // it again (FrontendQueue::Reconnect). A new backend then attaches to the
  // ring as to a new one. REQUIRES: no backend serves the ring meanwhile.
  void ReconnectRing();

 private:
  Queue() = default;

  QueueOptions options_;
  const Protocol* protocol_ = nullptr;
  FrontendLayout layout_;
  uint32_t ring_pages_ = 0;
  // The counters live in a memfd of their own, so that a backend process
  // counts into them too.
  std::unique_ptr<SharedStats> shared_stats_;
  std::unique_ptr<trace::QueueTrace> trace_;
  std::unique_ptr<SharedRegion> region_;
  std::unique_ptr<RegionMapping> front_mapping_;
  std::unique_ptr<RegionMapping> back_mapping_;
  std::unique_ptr<EventFd> kick_;
  std::unique_ptr<EventFd> irq_;
  std::unique_ptr<GrantMapper> grants_;
  std::unique_ptr<DeviceRing> device_ring_;
  std::unique_ptr<FrontendQueue> frontend_;
};

}  // namespace pvdisk::transport
