// SharedStats: one queue's counters (stats::QueueStats) in a memfd of their
// own, so that a backend in another process counts into the same block the
// stats file reads. QueueStats is relaxed atomics only (address-free), so
// both processes may update it at once. The ring region stays free of
// counters: the stats page is never shown to the ring protocol.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stats/queue_stats.h"
#include "transport/shared_region.h"

namespace pvdisk::transport {

class SharedStats {
 public:
  // A new, zeroed block; `name` shows in /proc/PID/fd.
  static absl::StatusOr<std::unique_ptr<SharedStats>> Create(
      const std::string& name);
  // Maps the block made by Create() in another process; takes `fd`.
  static absl::StatusOr<std::unique_ptr<SharedStats>> Attach(int fd);

  stats::QueueStats& stats() const { return *stats_; }
  int fd() const { return region_->fd(); }

 private:
  SharedStats() = default;

  std::unique_ptr<SharedRegion> region_;
  std::unique_ptr<RegionMapping> mapping_;
  stats::QueueStats* stats_ = nullptr;
};

}  // namespace pvdisk::transport
