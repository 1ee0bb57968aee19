// The backend threads of one disk, as one function builds them for both
// places a backend runs (in the daemon, see transport.h, or in a backend
// process, see process/backend_host.h): queue q is served by thread
// q % threads; each thread has one engine whose depth is the sum of its
// queues' ring sizes (capped at what an io_uring can hold, the cap then
// being respected through engine_max_inflight).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/backend_loop.h"
#include "transport/transport.h"

namespace pvdisk::transport {

// The engine depth for one backend serving `ring_slots` ring entries in
// all: every request its rings can hold, unless that is more than an
// io_uring can; then the depth becomes a cap the backend respects (set in
// `backend`'s engine_max_inflight), shown in the stats header as
// engine_depth.
uint32_t EngineDepthFor(uint32_t ring_slots, BackendOptions* backend);

struct BackendGroup {
  std::vector<std::unique_ptr<BackendLoop>> loops;
  uint32_t engine_depth = 0;  // the deepest engine
};

// `queues[q]` reaches queue q (its buffer_index is filled in here);
// `pools[q]` is its data pool as an engine buffer, or empty.
absl::StatusOr<BackendGroup> MakeBackendGroup(std::vector<BackendQueue> queues,
                                              const std::vector<iovec>& pools,
                                              uint32_t threads,
                                              uint32_t ring_size,
                                              const BackendOptions& options,
                                              const EngineFactory& make_engine);

}  // namespace pvdisk::transport
