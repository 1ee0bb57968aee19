#include "transport/transport.h"

#include <sched.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "io/engine_factory.h"
#include "transport/backend_group.h"

namespace pvdisk::transport {

absl::StatusOr<QueueMap> ParseQueueMap(std::string_view text) {
  if (text == "thread") return QueueMap::kThread;
  if (text == "offset") return QueueMap::kOffset;
  if (text == "round-robin") return QueueMap::kRoundRobin;
  if (text == "cpu") return QueueMap::kCpu;
  return absl::InvalidArgumentError(
      absl::StrCat("--queue-map '", absl::string_view(text.data(), text.size()),
                   "' is not allowed: use offset, thread, round-robin or cpu"));
}

std::string_view QueueMapName(QueueMap map) {
  switch (map) {
    case QueueMap::kThread:
      return "thread";
    case QueueMap::kOffset:
      return "offset";
    case QueueMap::kRoundRobin:
      return "round-robin";
    case QueueMap::kCpu:
      return "cpu";
  }
  return "?";
}

namespace {
thread_local int thread_queue_hint = -1;
}  // namespace

void SetThreadQueueHint(int q) { thread_queue_hint = q; }

std::string_view PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kBackendThread:
      return "backend-thread";
    case Placement::kInline:
      return "inline";
  }
  return "?";
}

absl::Status ValidateTransportOptions(const TransportOptions& options) {
  if (options.queues < 1 || options.queues > kMaxQueues) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--queues ", options.queues, " is not allowed: use 1 to ", kMaxQueues));
  }
  if (options.placement == Placement::kInline &&
      (options.queue_map != QueueMap::kCpu || options.backend_threads != 1 ||
       options.queue.irq != InterruptMode::kInline)) {
    return absl::InvalidArgumentError(
        "--placement inline drives each queue from its FUSE queue's thread: "
        "it needs --queue-map cpu, one backend thread setting and --irq "
        "inline");
  }
  if (options.backend_threads < 1 || options.backend_threads > options.queues) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend-threads ", options.backend_threads,
                     " is not allowed: use 1 to the number of queues (",
                     options.queues, ")"));
  }
  if (options.backend_elsewhere && !options.queue.lent.empty()) {
    // The lent memory is this process's; a backend process sees only the
    // queues' memfds, and would refuse every request on lent pages.
    return absl::InvalidArgumentError(
        "lent memory needs the backend in this process: a backend process "
        "(--backend process) cannot reach it");
  }
  return ValidateQueueOptions(options.queue);
}

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(
    const TransportOptions& options, const EngineFactory& make_engine) {
  PVDISK_RETURN_IF_ERROR(ValidateTransportOptions(options));
  std::unique_ptr<Transport> transport(new Transport());
  transport->options_ = options;
  transport->make_engine_ = make_engine;
  for (uint32_t q = 0; q < options.queues; ++q) {
    QueueOptions queue_options = options.queue;
    queue_options.name = absl::StrCat(options.queue.name, "-q", q);
    queue_options.index = static_cast<uint16_t>(q);
    PVDISK_ASSIGN_OR_RETURN(std::unique_ptr<Queue> queue,
                            Queue::Create(queue_options));
    transport->queues_.push_back(std::move(queue));
  }
  // With the backend elsewhere (a backend process) the daemon keeps only
  // the frontends.
  if (options.backend_elsewhere) return transport;
  if (options.placement == Placement::kInline) {
    // Backends come with their drivers (AttachDriven).
    transport->backends_.resize(options.queues);
    BackendOptions unused = options.backend;
    transport->engine_depth_ = EngineDepthFor(options.queue.ring_size, &unused);
    return transport;
  }
  std::vector<BackendQueue> backend_queues;
  std::vector<iovec> pools;
  for (auto& queue : transport->queues_) {
    backend_queues.push_back(queue->ForBackend(-1));
    pools.push_back(queue->PoolBuffer());
  }
  PVDISK_ASSIGN_OR_RETURN(
      BackendGroup group,
      MakeBackendGroup(std::move(backend_queues), pools,
                       options.backend_threads, options.queue.ring_size,
                       options.backend, make_engine));
  transport->backends_ = std::move(group.loops);
  transport->engine_depth_ = group.engine_depth;
  return transport;
}

absl::StatusOr<Transport::Driven> Transport::AttachDriven(
    uint32_t q, io::RingLender* lender, KickHandler* kicks) {
  if (options_.placement != Placement::kInline || q >= queues_.size() ||
      backends_[q] != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue ", q, " cannot take a driven backend"));
  }
  Queue& queue = *queues_[q];
  iovec pool = queue.PoolBuffer();
  std::vector<iovec> buffers;
  if (pool.iov_len > 0) buffers.push_back(pool);
  BackendQueue backend_queue = queue.ForBackend(buffers.empty() ? -1 : 0);
  std::vector<BackendQueue> served = {backend_queue};
  BackendOptions backend_options = options_.backend;
  uint32_t engine_depth =
      EngineDepthFor(options_.queue.ring_size, &backend_options);
  EngineMaker make_backend_engine = [make_engine = make_engine_, engine_depth,
                                     lender] {
    return make_engine(engine_depth, lender);
  };
  PVDISK_ASSIGN_OR_RETURN(backends_[q],
                          BackendLoop::CreateDriven(
                              std::move(served), std::move(buffers),
                              std::move(make_backend_engine), backend_options));
  queue.frontend().SetKickHandler(kicks);
  return Driven{backends_[q].get(), backend_queue.kick->fd()};
}

Transport::~Transport() {
  Shutdown();
  if (abandoned_) {
    // Abandon()'s contract: what a hung backend may still touch stays.
    for (auto& backend : backends_) (void)backend.release();
    for (auto& queue : queues_) (void)queue.release();
  }
}

void Transport::Start() {
  started_ = true;
  if (options_.placement == Placement::kBackendThread) {
    for (auto& backend : backends_) backend->Start();
  }
  for (auto& queue : queues_) queue->frontend().Start();
}

bool Transport::Drain(std::chrono::steady_clock::time_point deadline) {
  if (!started_) return true;
  for (auto& queue : queues_) {
    if (!queue->frontend().Drain(deadline)) return false;
  }
  return true;
}

FrontendQueue::Abandoned Transport::Abandon() {
  abandoned_ = true;
  FrontendQueue::Abandoned total;
  for (auto& queue : queues_) {
    FrontendQueue::Abandoned abandoned = queue->frontend().Abandon();
    total.requests += abandoned.requests;
    total.bytes += abandoned.bytes;
  }
  return total;
}

void Transport::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (!started_) return;
  if (!abandoned_) {
    for (auto& queue : queues_) queue->frontend().Drain();
    for (auto& backend : backends_) {
      if (backend) backend->Stop();  // driven ones have no thread to stop
    }
  }
  // Abandoned queues hold no BlockIo: their completion threads end at once.
  for (auto& queue : queues_) queue->frontend().Stop();
}

Queue& Transport::QueueFor(uint64_t sector) {
  const uint32_t count = static_cast<uint32_t>(queues_.size());
  if (count == 1) return *queues_[0];
  switch (options_.queue_map) {
    case QueueMap::kThread: {
      // Each thread keeps the slot it got first; a thread serving several
      // Transports shares one slot number among them, which is fine.
      thread_local uint32_t slot = UINT32_MAX;
      if (slot == UINT32_MAX) {
        slot = next_.fetch_add(1, std::memory_order_relaxed);
      }
      return *queues_[slot % count];
    }
    case QueueMap::kOffset:
      return *queues_[(sector >> 11) % count];  // 2048 sectors = 1 MiB
    case QueueMap::kRoundRobin:
      return *queues_[next_.fetch_add(1, std::memory_order_relaxed) % count];
    case QueueMap::kCpu: {
      int cpu = thread_queue_hint >= 0 ? thread_queue_hint : sched_getcpu();
      return *queues_[cpu < 0 ? 0 : static_cast<uint32_t>(cpu) % count];
    }
  }
  return *queues_[0];
}

bool Transport::uses_fixed_buffers() const {
  for (const auto& backend : backends_) {
    if (!backend || !backend->uses_fixed_buffers()) return false;
  }
  return !backends_.empty();
}

std::string_view Transport::engine_mode() const {
  return backends_.empty() || !backends_[0]
             ? std::string_view()
             : std::string_view(backends_[0]->engine_mode());
}

}  // namespace pvdisk::transport
