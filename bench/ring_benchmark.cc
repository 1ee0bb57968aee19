// Microbenchmarks of the blkif ring on its own (no threads, no I/O): how many
// request/response round trips per second one core can push through the
// encode -> publish+notify decision -> take+validate -> respond -> publish ->
// consume cycle, with batches of 1 and 32 requests.
#include <benchmark/benchmark.h>

#include <memory>

#include "transport/blkif/device_ring.h"
#include "transport/blkif/driver_ring.h"
#include "transport/blkif/format.h"
#include "transport/shared_region.h"

namespace pvdisk::transport {
namespace {

constexpr uint32_t kSlots = 256;
constexpr uint32_t kDataPages = kSlots * blkif::kMaxDirectSegments;

struct Rings {
  std::unique_ptr<SharedRegion> region;
  std::unique_ptr<RegionMapping> front;
  std::unique_ptr<RegionMapping> back;
  std::unique_ptr<GrantMapper> grants;
  std::unique_ptr<BlkifDriverRing> driver;
  std::unique_ptr<BlkifDeviceRing> device;
};

Rings MakeRings() {
  Rings r;
  size_t ring_bytes = blkif::RingBytes(kSlots);
  r.region =
      *SharedRegion::Create("bench", ring_bytes + size_t{kDataPages} * 4096);
  r.front = *r.region->Map();
  r.back = *r.region->Map();
  size_t data_offset = blkif::RingBytes(kSlots);
  r.driver = std::make_unique<BlkifDriverRing>(r.front->base(), kSlots,
                                               r.front->base() + data_offset,
                                               NotifyMode::kEventIdx);
  r.grants = NewPersistentGrants(r.back->base() + data_offset);
  BlkifDeviceLimits limits;
  limits.disk_sectors = uint64_t{1} << 30;
  limits.data_pages = kDataPages;
  r.device = std::make_unique<BlkifDeviceRing>(
      r.back->base(), kSlots, r.grants.get(), limits, NotifyMode::kEventIdx);
  return r;
}

// range(0): requests per batch. Each batch is published once, taken,
// answered, published once and consumed; the final checks run as they would
// before sleeping.
void BM_BlkifRoundTrip(benchmark::State& state) {
  Rings rings = MakeRings();
  const int batch = static_cast<int>(state.range(0));
  DataSegment segment{0, 0, 7};  // one 4 KiB page
  DeviceRequest taken;
  uint64_t kicks = 0;
  uint64_t irqs = 0;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) {
      RingRequest request;
      request.op = BlockOp::kRead;
      request.id = static_cast<uint64_t>(i);
      request.sector = static_cast<uint64_t>(i) * 8;
      request.num_sectors = 8;
      segment.page = static_cast<uint32_t>(i);
      request.segments = &segment;
      request.segment_count = 1;
      rings.driver->Write(request);
    }
    kicks += rings.driver->Publish() == PushResult::kNotify;
    while (rings.device->TakeRequest(&taken) == TakeResult::kValid) {
      rings.device->PutResponse(taken, 0);
    }
    benchmark::DoNotOptimize(rings.device->FinalCheckForRequests());
    irqs += rings.device->PublishResponses() == PushResult::kNotify;
    rings.driver->ConsumeResponses(
        [](uint64_t id, int result) { benchmark::DoNotOptimize(id + result); });
    benchmark::DoNotOptimize(rings.driver->FinalCheckForResponses());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["kicks_per_req"] =
      benchmark::Counter(static_cast<double>(kicks) /
                         static_cast<double>(state.iterations() * batch));
  state.counters["irqs_per_req"] =
      benchmark::Counter(static_cast<double>(irqs) /
                         static_cast<double>(state.iterations() * batch));
}
BENCHMARK(BM_BlkifRoundTrip)->Arg(1)->Arg(32);

// The cost of taking and validating one 11-segment request.
void BM_BlkifTakeAndValidate(benchmark::State& state) {
  Rings rings = MakeRings();
  DataSegment segments[blkif::kMaxDirectSegments];
  for (uint32_t i = 0; i < blkif::kMaxDirectSegments; ++i) {
    segments[i] = DataSegment{i, 0, 7};
  }
  DeviceRequest taken;
  for (auto _ : state) {
    RingRequest request;
    request.op = BlockOp::kWrite;
    request.sector = 4096;
    request.num_sectors = 88;
    request.segments = segments;
    request.segment_count = blkif::kMaxDirectSegments;
    rings.driver->Write(request);
    rings.driver->Publish();
    benchmark::DoNotOptimize(rings.device->TakeRequest(&taken));
    rings.device->PutResponse(taken, 0);
    rings.device->PublishResponses();
    rings.driver->ConsumeResponses([](uint64_t, int) {});
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BlkifTakeAndValidate);

}  // namespace
}  // namespace pvdisk::transport

BENCHMARK_MAIN();
