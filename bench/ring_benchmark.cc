// Ring round trips per second, for each protocol in the registry and each
// notification mode, on one core with no threads and no I/O: one benchmark
// iteration is one batch going all the way round,
//
//   driver: write `batch` 1-page reads, publish + kick decision
//   device: take + validate each, put its response, publish + interrupt
//           decision
//   driver: consume the responses
//
// and, with peers_sleep:1, each side's final check before it would sleep
// (re-arming notifications), as when both ends are idle between batches.
// With peers_sleep:0 neither end re-arms, as when both stay busy (polling).
//
// Reported: items_per_second (requests), kicks_per_req and irqs_per_req (how
// often a publish decided the peer must be notified; no eventfd is written).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "ring_fixture.h"
#include "transport/protocol.h"

namespace pvdisk::transport::bench {
namespace {

void RoundTrip(benchmark::State& state, const Protocol* protocol,
               NotifyMode notify) {
  const int batch = static_cast<int>(state.range(0));
  const bool peers_sleep = state.range(1) != 0;
  auto rings = RingPair::Create(*protocol, notify);
  if (!rings.ok()) {
    state.SkipWithError(rings.status().ToString().c_str());
    return;
  }
  DriverRing& driver = (*rings)->driver();
  DeviceRing& device = (*rings)->device();
  DeviceRequest taken;
  uint64_t kicks = 0;
  uint64_t irqs = 0;
  uint64_t answered = 0;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) {
      (*rings)->WriteRequest(BlockOp::kRead, static_cast<uint64_t>(i), 1);
    }
    kicks += driver.Publish() == PushResult::kNotify;
    TakeResult result;
    while ((result = device.TakeRequest(&taken)) == TakeResult::kValid) {
      device.PutResponse(taken, 0);
    }
    if (result != TakeResult::kNone) {
      state.SkipWithError("the device refused a request");
      break;
    }
    if (peers_sleep) benchmark::DoNotOptimize(device.FinalCheckForRequests());
    irqs += device.PublishResponses() == PushResult::kNotify;
    answered += static_cast<uint64_t>(
        driver.ConsumeResponses([](uint64_t id, int status) {
          benchmark::DoNotOptimize(id + status);
        }));
    if (peers_sleep) benchmark::DoNotOptimize(driver.FinalCheckForResponses());
  }
  const uint64_t requests = state.iterations() * static_cast<uint64_t>(batch);
  if (!state.error_occurred() && answered != requests) {
    state.SkipWithError("responses lost");
  }
  state.SetItemsProcessed(static_cast<int64_t>(requests));
  state.counters["kicks_per_req"] = static_cast<double>(kicks) / requests;
  state.counters["irqs_per_req"] = static_cast<double>(irqs) / requests;
}

// RoundTrip/<protocol>/<notify>/batch:{1,32}/peers_sleep:{1,0} for every
// registered protocol.
void RegisterRoundTrips() {
  for (std::string_view name : ProtocolNames()) {
    const Protocol* protocol = *FindProtocol(name);
    for (const NamedNotifyMode& notify : kNotifyModes) {
      std::string title = "RoundTrip/";
      title.append(name).append("/").append(notify.name);
      benchmark::RegisterBenchmark(title.c_str(), RoundTrip, protocol,
                                   notify.mode)
          ->ArgNames({"batch", "peers_sleep"})
          ->ArgsProduct({{1, 32}, {1, 0}});
    }
  }
}

}  // namespace
}  // namespace pvdisk::transport::bench

int main(int argc, char** argv) {
  pvdisk::transport::bench::RegisterRoundTrips();
  return pvdisk::transport::bench::RunBenchmarks(argc, argv);
}
