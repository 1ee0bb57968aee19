#include "transport/backend_group.h"

#include <algorithm>

#include "base/status_macros.h"
#include "io/engine_factory.h"

namespace pvdisk::transport {

uint32_t EngineDepthFor(uint32_t ring_slots, BackendOptions* backend) {
  uint32_t engine_depth = std::min(ring_slots, io::kMaxEngineDepth);
  if (engine_depth < ring_slots &&
      (backend->engine_max_inflight == 0 ||
       backend->engine_max_inflight > engine_depth)) {
    backend->engine_max_inflight = engine_depth;
  }
  return engine_depth;
}

absl::StatusOr<BackendGroup> MakeBackendGroup(
    std::vector<BackendQueue> queues, const std::vector<iovec>& pools,
    uint32_t threads, uint32_t ring_size, const BackendOptions& options,
    const EngineFactory& make_engine) {
  BackendGroup group;
  const uint32_t count = static_cast<uint32_t>(queues.size());
  for (uint32_t t = 0; t < threads; ++t) {
    std::vector<BackendQueue> served;
    std::vector<iovec> buffers;
    uint32_t depth = 0;
    for (uint32_t q = t; q < count; q += threads) {
      BackendQueue queue = queues[q];
      queue.buffer_index = -1;
      if (pools[q].iov_len > 0) {
        queue.buffer_index = static_cast<int>(buffers.size());
        buffers.push_back(pools[q]);
      }
      served.push_back(queue);
      depth += ring_size;
    }
    BackendOptions backend_options = options;
    uint32_t engine_depth = EngineDepthFor(depth, &backend_options);
    group.engine_depth = std::max(group.engine_depth, engine_depth);
    EngineMaker make_backend_engine = [make_engine, engine_depth] {
      return make_engine(engine_depth, nullptr);
    };
    PVDISK_ASSIGN_OR_RETURN(
        std::unique_ptr<BackendLoop> backend,
        BackendLoop::Create(std::move(served), std::move(buffers),
                            std::move(make_backend_engine), backend_options));
    group.loops.push_back(std::move(backend));
  }
  return group;
}

}  // namespace pvdisk::transport
