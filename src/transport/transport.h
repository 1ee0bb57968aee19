// Transport: all queues of one disk and the backends that serve them.
// Which queue a request goes to is the QueueMap policy. Where the backends
// run is the Placement:
// - kBackendThread: queue q is served by backend thread q % backend_threads;
//   each backend thread has one I/O engine whose depth is the sum of its
//   queues' ring sizes.
// - kInline: no backend threads. Queue q's backend is made and driven by
//   the thread that owns FUSE queue q (AttachDriven), with an engine of the
//   ring's depth on that thread's io_uring, and kicks to it are function
//   calls there. Queues map to CPUs (QueueMap::kCpu), as the FUSE queues
//   do, so a request stays on the thread that received it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/io_engine.h"
#include "io/ring_lender.h"
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
  kCpu,         // the queue of the CPU the submitting thread runs on, modulo
                // the queue count (blk-mq's CPU-to-hardware-queue map)
};

enum class Placement {
  kBackendThread,  // backends on threads of their own
  kInline,         // each backend driven by its FUSE queue's thread
};

std::string_view PlacementName(Placement placement);

// Under QueueMap::kCpu, requests the calling thread submits go to queue `q`
// (modulo the count) instead of its CPU's: the inline placement's FUSE
// queue threads set their queue index, so that a request stays on the queue
// its thread drives even when the scheduler moves the thread. -1 clears it.
void SetThreadQueueHint(int q);

absl::StatusOr<QueueMap> ParseQueueMap(std::string_view text);
std::string_view QueueMapName(QueueMap map);

struct TransportOptions {
  QueueOptions queue;  // applies to every queue; `name` gets "-qN" appended
  uint32_t queues = 2;
  uint32_t backend_threads = 1;
  QueueMap queue_map = QueueMap::kOffset;
  BackendOptions backend;
  Placement placement = Placement::kBackendThread;
  // The backend runs elsewhere (--backend process, see
  // process/backend_supervisor.h): Create() makes the queues and no
  // backend thread, and the caller attaches a backend to them.
  bool backend_elsewhere = false;
};

// Checks queue counts and thread counts (and the queue options).
absl::Status ValidateTransportOptions(const TransportOptions& options);

// Makes the engine of one backend, of the given depth, on the lender's ring
// when one is given (kInline; null otherwise). Kept for the transport's
// life: a backend calls it again (from its own thread) to replace an engine
// that failed, so it must own what it captures.
using EngineFactory =
    std::function<absl::StatusOr<std::unique_ptr<io::IoEngine>>(
        uint32_t depth, io::RingLender* lender)>;

class Transport {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Create(
      const TransportOptions& options, const EngineFactory& make_engine);
  ~Transport();

  // Starts the frontends' completion threads and (kBackendThread) the
  // backend threads. With kInline every queue must have been attached.
  void Start();

  // kInline: makes queue q's backend, to be driven by the calling thread
  // with BackendLoop::RunRound(); its engine is made with `lender` (the
  // thread's ring, for the uring engine), and the queue's kicks go to
  // `kicks`. The loop stays owned by the transport; the driver calls
  // ReleaseEngine() before it goes away. Returns the loop and the queue's
  // kick eventfd (for kicks from other threads, which the driver watches).
  struct Driven {
    BackendLoop* backend = nullptr;
    int kick_fd = -1;
  };
  absl::StatusOr<Driven> AttachDriven(uint32_t q, io::RingLender* lender,
                                      KickHandler* kicks);
  // Waits until every submitted BlockIo has completed, or until `deadline`;
  // returns whether all did.
  bool Drain(std::chrono::steady_clock::time_point deadline);
  // Shutdown gives up on backends that did not answer in time: every queue
  // fails what it holds and all later requests with EIO
  // (FrontendQueue::Abandon). Returns the sum of what was given up on.
  // Contract: a backend thread or engine may still hold those requests and
  // their pages (a hung engine, or the kernel still writing into a read's
  // pages), so after this the transport's threads are never joined and its
  // memory is never freed: Shutdown() stops only the completion threads,
  // and destroying the transport leaks its queues and backends. The owner
  // is expected to exit the process soon.
  FrontendQueue::Abandoned Abandon();
  // Waits for every submitted BlockIo to complete (unless Abandon() ran),
  // then stops all threads. Idempotent.
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
  std::vector<std::unique_ptr<BackendLoop>> backends_;  // kInline: by queue
  EngineFactory make_engine_;                           // kept for AttachDriven
  uint32_t engine_depth_ = 0;
  std::atomic<uint32_t> next_{0};  // kRoundRobin and kThread assignment
  bool started_ = false;
  bool shut_down_ = false;
  bool abandoned_ = false;
};

}  // namespace pvdisk::transport
