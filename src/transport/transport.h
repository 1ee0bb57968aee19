// Transport: all queues of one disk and the backend threads that serve them.
// Queue q is served by backend thread q % backend_threads; each backend
// thread has one I/O engine whose depth is the sum of its queues' ring
// sizes. Which queue a request goes to is the QueueMap policy.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/io_engine.h"
#include "transport/backend_loop.h"
#include "transport/queue.h"

namespace pvdisk::transport {

inline constexpr uint32_t kMaxQueues = 64;

// Which queue a request goes to.
enum class QueueMap {
  kThread,      // the submitting thread's queue, assigned round-robin to
                // threads on first use (blk-mq's per-CPU software queues)
  kOffset,      // by disk offset, 1 MiB stripes: sequential runs stay on one
                // queue, random I/O spreads over all
  kRoundRobin,  // each request to the next queue
};

absl::StatusOr<QueueMap> ParseQueueMap(std::string_view text);
std::string_view QueueMapName(QueueMap map);

struct TransportOptions {
  QueueOptions queue;  // applies to every queue; `name` gets "-qN" appended
  uint32_t queues = 2;
  uint32_t backend_threads = 1;
  QueueMap queue_map = QueueMap::kOffset;
  BackendOptions backend;
  // The backend runs elsewhere (--backend process, see
  // process/backend_supervisor.h): Create() makes the queues and no
  // backend thread, and the caller attaches a backend to them.
  bool backend_elsewhere = false;
};

// Checks queue counts and thread counts (and the queue options).
absl::Status ValidateTransportOptions(const TransportOptions& options);

// Makes the engine of one backend thread, of the given depth. Kept for the
// transport's life: a backend calls it again (from its own thread) to
// replace an engine that failed, so it must own what it captures.
using EngineFactory =
    std::function<absl::StatusOr<std::unique_ptr<io::IoEngine>>(uint32_t)>;

class Transport {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Create(
      const TransportOptions& options, const EngineFactory& make_engine);
  ~Transport();

  void Start();
  // Waits for every submitted BlockIo to complete, then stops all threads.
  // Idempotent.
  void Shutdown();

  // The queue for a request starting at `sector`, by the QueueMap policy.
  Queue& QueueFor(uint64_t sector);
  size_t queue_count() const { return queues_.size(); }
  Queue& queue(size_t index) { return *queues_[index]; }
  const TransportOptions& options() const { return options_; }
  // Whether the backends really use fixed buffers (io_uring registered the
  // data pools).
  bool uses_fixed_buffers() const;
  // The engine's description, e.g. "O_DIRECT".
  std::string_view engine_mode() const;
  // The deepest backend engine: the sum of the ring sizes it serves, or the
  // engine's maximum if that sum is larger.
  uint32_t engine_depth() const { return engine_depth_; }

 private:
  Transport() = default;

  TransportOptions options_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::unique_ptr<BackendLoop>> backends_;
  uint32_t engine_depth_ = 0;
  std::atomic<uint32_t> next_{0};  // kRoundRobin and kThread assignment
  bool started_ = false;
  bool shut_down_ = false;
};

}  // namespace pvdisk::transport
