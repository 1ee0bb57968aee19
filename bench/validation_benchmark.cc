// The device side's cost of taking one request: copying it out of shared
// memory once and validating it (plus, for indirect requests, copying the
// segment list or descriptor table out of the data area), for each protocol
// in the registry and requests of 1, 11 and 256 one-page segments. 11 is
// blkif's largest direct request and already an indirect table in virtio;
// 256 is indirect in both.
//
// Each iteration writes and publishes kBatch writes, times only the device
// taking all of them (manual time, steady clock), then answers and consumes
// them untimed. items_per_second is requests taken and validated per second
// of that timed part (the Time column is per kBatch requests; the CPU column
// covers the whole iteration). Persistent grants: no page is mapped per
// request.
#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ring_fixture.h"
#include "transport/protocol.h"

namespace pvdisk::transport::bench {
namespace {

// Requests per timed run: enough that reading the clock twice is small
// beside them, few enough for 1-segment virtio chains (3 descriptors each).
constexpr int kBatch = 64;

void TakeAndValidate(benchmark::State& state, const Protocol* protocol) {
  const uint32_t segments = static_cast<uint32_t>(state.range(0));
  auto rings = RingPair::Create(*protocol, NotifyMode::kEventIdx);
  if (!rings.ok()) {
    state.SkipWithError(rings.status().ToString().c_str());
    return;
  }
  DriverRing& driver = (*rings)->driver();
  DeviceRing& device = (*rings)->device();
  // Reused, as a backend keeps its requests' segment vectors warm.
  std::array<DeviceRequest, kBatch> taken;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      (*rings)->WriteRequest(BlockOp::kWrite, static_cast<uint64_t>(i),
                             segments);
    }
    driver.Publish();

    int valid = 0;
    const auto start = std::chrono::steady_clock::now();
    for (DeviceRequest& request : taken) {
      valid += device.TakeRequest(&request) == TakeResult::kValid;
    }
    const auto stop = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());

    if (valid != kBatch) {
      state.SkipWithError("the device refused a request");
      break;
    }
    for (const DeviceRequest& request : taken) device.PutResponse(request, 0);
    device.PublishResponses();
    driver.ConsumeResponses([](uint64_t, int) {});
  }
  if (!state.error_occurred() && taken.front().segments.size() != segments) {
    state.SkipWithError("the device decoded another segment count");
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  // 1 when the segments came from an out-of-slot table (blkif indirect
  // pages, a virtio indirect descriptor table).
  state.counters["indirect"] = taken.front().indirect;
}

// TakeAndValidate/<protocol>/segments:{1,11,256} for every registered
// protocol.
void RegisterValidations() {
  for (std::string_view name : ProtocolNames()) {
    std::string title = "TakeAndValidate/";
    title.append(name);
    benchmark::RegisterBenchmark(title.c_str(), TakeAndValidate,
                                 *FindProtocol(name))
        ->ArgName("segments")
        ->Arg(1)
        ->Arg(11)
        ->Arg(256)
        ->UseManualTime();
  }
}

}  // namespace
}  // namespace pvdisk::transport::bench

int main(int argc, char** argv) {
  pvdisk::transport::bench::RegisterValidations();
  return pvdisk::transport::bench::RunBenchmarks(argc, argv);
}
