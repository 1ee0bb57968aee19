// Queue: one complete queue of a disk, wired together: a shared region with
// the ring and the data pages, a kick and an interrupt eventfd, the frontend
// (driver) side and the backend (device) side with its I/O engine, and the
// queue's counters. The protocol today is blkif; a second frontend plugs in
// at Create().
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "io/io_engine.h"
#include "stats/queue_stats.h"
#include "transport/backend_loop.h"
#include "transport/event_fd.h"
#include "transport/frontend_queue.h"
#include "transport/shared_region.h"

namespace pvdisk::transport {

inline constexpr uint32_t kMinRingSize = 32;
inline constexpr uint32_t kMaxRingSize = 4096;
inline constexpr uint32_t kDefaultRingSize = 256;
// The largest BlockIo a queue must take whole: a 1 MiB FUSE request (the
// kernel's max_pages = 256) plus one page for an unaligned start or end.
inline constexpr uint64_t kMaxBlockIoSectors = (1 << 20) / 512 + 8;

struct QueueOptions {
  std::string name;  // for the memfd, e.g. "pvdisk-disk0.img-q0"
  uint32_t ring_size = kDefaultRingSize;  // slots; power of two, 32..4096
  uint32_t max_segments = 11;             // pages per ring request
  uint64_t disk_sectors = 0;
  bool read_only = false;
};

// Checks ring_size and max_segments; the message names the flag and the
// allowed range.
absl::Status ValidateQueueOptions(const QueueOptions& options);

class Queue {
 public:
  // Builds the queue; `engine` serves this queue only. Threads do not run
  // until Start().
  static absl::StatusOr<std::unique_ptr<Queue>> Create(
      const QueueOptions& options, std::unique_ptr<io::IoEngine> engine);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  void Start();
  // Waits for every submitted BlockIo to complete, then stops both threads.
  void Shutdown();

  FrontendQueue& frontend() { return *frontend_; }
  stats::QueueStats& stats() { return stats_; }

 private:
  Queue() = default;

  stats::QueueStats stats_;
  std::unique_ptr<SharedRegion> region_;
  std::unique_ptr<RegionMapping> front_mapping_;
  std::unique_ptr<RegionMapping> back_mapping_;
  std::unique_ptr<EventFd> kick_;
  std::unique_ptr<EventFd> irq_;
  std::unique_ptr<FrontendQueue> frontend_;
  std::unique_ptr<BackendLoop> backend_;
};

}  // namespace pvdisk::transport
