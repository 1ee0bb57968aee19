// The microbenchmarks' test bench: a driver ring and a device ring of one
// protocol, built through the Protocol interface over one shared region laid
// out as transport::Queue lays it out (the ring, a data pool, then each
// request id's table pages), with persistent grants. No threads, eventfds,
// engine or I/O: the benchmarks call both ends in turn on one core, so they
// measure the ring code alone.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/device_ring.h"
#include "transport/driver_ring.h"
#include "transport/grant_mapper.h"
#include "transport/protocol.h"
#include "transport/ring_request.h"
#include "transport/shared_region.h"

namespace pvdisk::transport::bench {

// The --notify values the benchmarks cover, with their command-line names.
struct NamedNotifyMode {
  NotifyMode mode;
  const char* name;
};
inline constexpr NamedNotifyMode kNotifyModes[] = {
    {NotifyMode::kEventIdx, "event-idx"}, {NotifyMode::kAlways, "always"}};

class RingPair {
 public:
  // Ring entries (blkif slots, virtio descriptors).
  static constexpr uint32_t kSlots = 256;
  // The most data segments a request may carry: 256 is indirect in both
  // protocols (blkif's direct maximum is 11, virtio's driver goes indirect
  // above 2).
  static constexpr uint32_t kMaxSegments = 256;
  // Data pages requests point at. With persistent grants neither end touches
  // them, so they cost only address space.
  static constexpr uint32_t kPoolPages = kMaxSegments;
  static constexpr uint64_t kDiskSectors = uint64_t{1} << 30;

  static absl::StatusOr<std::unique_ptr<RingPair>> Create(
      const Protocol& protocol, NotifyMode notify) {
    const uint32_t table_pages = protocol.TablePagesPerRequest(kMaxSegments);
    const uint32_t data_pages = kPoolPages + kSlots * table_pages;
    const size_t ring_bytes = protocol.RingBytes(kSlots);
    std::unique_ptr<RingPair> pair(new RingPair(table_pages));
    auto region = SharedRegion::Create("pvdisk-bench",
                                       ring_bytes + size_t{data_pages} * 4096);
    if (!region.ok()) return region.status();
    pair->region_ = *std::move(region);
    auto front = pair->region_->Map();
    if (!front.ok()) return front.status();
    pair->front_ = *std::move(front);
    auto back = pair->region_->Map();
    if (!back.ok()) return back.status();
    pair->back_ = *std::move(back);

    uint8_t* front_base = pair->front_->base();
    uint8_t* back_base = pair->back_->base();
    pair->grants_ = NewPersistentGrants(back_base + ring_bytes);
    // The driver ring initialises the shared ring, so it comes first.
    pair->driver_ = protocol.NewDriverRing(front_base, kSlots,
                                           front_base + ring_bytes, notify);
    DeviceLimits limits;
    limits.disk_sectors = kDiskSectors;
    limits.data_pages = data_pages;
    limits.max_segments = kMaxSegments;
    pair->device_ = protocol.NewDeviceRing(back_base, kSlots,
                                           pair->grants_.get(), limits, notify);
    return pair;
  }

  DriverRing& driver() { return *driver_; }
  DeviceRing& device() { return *device_; }

  // Writes into the ring, without publishing it, a request `id` (below
  // kSlots, not in flight) of `op` (kRead or kWrite) over `segment_count`
  // whole pages, with the id's table pages as FrontendQueue passes them.
  void WriteRequest(BlockOp op, uint64_t id, uint32_t segment_count) {
    for (uint32_t t = 0; t < table_pages_per_request_; ++t) {
      table_pages_[t] =
          kPoolPages + static_cast<uint32_t>(id) * table_pages_per_request_ + t;
    }
    RingRequest request;
    request.op = op;
    request.id = id;
    request.sector = id * kMaxSegments * 8;
    request.num_sectors = uint64_t{segment_count} * 8;
    request.segments = segments_.data();
    request.segment_count = segment_count;
    request.table_pages = table_pages_.data();
    request.table_page_count = table_pages_per_request_;
    driver_->Write(request);
  }

 private:
  explicit RingPair(uint32_t table_pages_per_request)
      : table_pages_per_request_(table_pages_per_request),
        table_pages_(table_pages_per_request) {
    // Segment i is all of pool page i.
    for (uint32_t i = 0; i < kMaxSegments; ++i) {
      segments_.push_back(DataSegment{i, 0, 7});
    }
  }

  uint32_t table_pages_per_request_;
  std::vector<uint32_t> table_pages_;  // scratch for one request
  std::vector<DataSegment> segments_;
  std::unique_ptr<SharedRegion> region_;
  std::unique_ptr<RegionMapping> front_;
  std::unique_ptr<RegionMapping> back_;
  std::unique_ptr<GrantMapper> grants_;
  std::unique_ptr<DriverRing> driver_;
  std::unique_ptr<DeviceRing> device_;
};

// The body of each benchmark program's main(), after it registered its
// benchmarks: parses libbenchmark's flags and runs what they select.
inline int RunBenchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace pvdisk::transport::bench
