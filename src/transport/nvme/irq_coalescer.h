// IrqCoalescer: NVMe's interrupt coalescing (feature 08h, Aggregation
// Threshold and Time) for one completion queue: the interrupt for new
// completions waits until `threshold` are pending or `time_us` passed since
// the first of them.
//
// pvdisk's device has no timer of its own: it decides whenever it publishes
// completions. So the time is checked at the next publish, and completions
// are never held while the device has no command in flight (no later
// publish would come to release them): then the interrupt goes at once.
// The wait is therefore bounded by the time limit or by the latency of the
// commands still in flight, whichever ends first.
#pragma once

#include <cstdint>

#include "transport/ring_request.h"

namespace pvdisk::transport::nvme {

class IrqCoalescer {
 public:
  explicit IrqCoalescer(const IrqCoalesce& config)
      : threshold_(config.threshold),
        time_ns_(uint64_t{config.time_us} * 1000) {}

  bool enabled() const { return threshold_ != 0; }

  // `added` completions were just published at `now_ns`, with `in_flight`
  // commands still to complete. True if their interrupt is held back.
  bool Hold(uint32_t added, uint32_t in_flight, uint64_t now_ns) {
    if (threshold_ == 0) return false;
    if (pending_ == 0) first_ns_ = now_ns;
    pending_ += added;
    const bool hold =
        pending_ < threshold_ && in_flight > 0 && now_ns - first_ns_ < time_ns_;
    if (!hold) pending_ = 0;
    return hold;
  }

 private:
  uint32_t threshold_;
  uint64_t time_ns_;
  uint32_t pending_ = 0;
  uint64_t first_ns_ = 0;
};

}  // namespace pvdisk::transport::nvme
