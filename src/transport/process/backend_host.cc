#include "transport/process/backend_host.h"

#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/event_log.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "transport/backend_group.h"
#include "transport/device_side.h"
#include "transport/process/wire.h"
#include "transport/shared_stats.h"

namespace pvdisk::transport::process {
namespace {

// How long the daemon may take to send the setup.
constexpr int kSetupTimeoutMs = 10'000;

// One queue as this process holds it.
struct HostedQueue {
  std::unique_ptr<SharedRegion> region;
  std::unique_ptr<SharedStats> stats;
  std::unique_ptr<EventFd> kick;
  std::unique_ptr<EventFd> irq;
  DeviceSide device;
};

absl::StatusOr<HostedQueue> ReceiveQueue(int socket,
                                         const QueueOptions& options) {
  PVDISK_ASSIGN_OR_RETURN(Packet packet,
                          ReceivePacket(socket, kSetupTimeoutMs));
  if (packet.fds.size() != kQueueFdCount) {
    CloseFds(packet);
    return absl::DataLossError("a queue packet without its descriptors");
  }
  HostedQueue queue;
  struct stat st;
  if (fstat(packet.fds[kRegionFd], &st) != 0) {
    int error = errno;
    CloseFds(packet);
    return ErrnoError(error, "fstat of a queue's region");
  }
  queue.region = SharedRegion::Adopt(packet.fds[kRegionFd],
                                     static_cast<size_t>(st.st_size));
  queue.kick = EventFd::Adopt(packet.fds[kKickFd]);
  queue.irq = EventFd::Adopt(packet.fds[kIrqFd]);
  PVDISK_ASSIGN_OR_RETURN(queue.stats,
                          SharedStats::Attach(packet.fds[kStatsFd]));
  PVDISK_ASSIGN_OR_RETURN(
      queue.device,
      AttachDeviceSide(options, queue.region.get(), &queue.stats->stats()));
  return queue;
}

// Receives the setup and the queues and starts serving them.
absl::Status Serve(int socket, const EngineFactoryMaker& make_factory,
                   std::vector<HostedQueue>* hosted, BackendGroup* group,
                   BackendEngines* served) {
  PVDISK_ASSIGN_OR_RETURN(Packet packet,
                          ReceivePacket(socket, kSetupTimeoutMs));
  // The image files, closed on every way out of here: the factory keeps
  // its own opens of them.
  struct ClosedAtEnd {
    Packet* packet;
    ~ClosedAtEnd() { CloseFds(*packet); }
  } image_files{&packet};
  PVDISK_ASSIGN_OR_RETURN(BackendSetup setup, DecodeSetup(packet.payload));
  // The daemon's log: a log file is this process's stderr (inherited).
  if (setup.log_target != LogTarget::kStderr) {
    SetLogTarget(setup.log_target, STDERR_FILENO);
  }
  if (packet.fds.size() != setup.image_files + setup.other_files) {
    return absl::DataLossError(
        absl::StrCat("the setup packet carries ", packet.fds.size(),
                     " descriptors for an image of ", setup.image_files,
                     " files and ", setup.other_files, " other files"));
  }
  const std::vector<int> image_fds(packet.fds.begin(),
                                   packet.fds.begin() + setup.image_files);
  const std::vector<int> other_fds(packet.fds.begin() + setup.image_files,
                                   packet.fds.end());
  for (uint32_t q = 0; q < setup.queues; ++q) {
    PVDISK_ASSIGN_OR_RETURN(HostedQueue queue,
                            ReceiveQueue(socket, setup.queue));
    hosted->push_back(std::move(queue));
  }
  PVDISK_ASSIGN_OR_RETURN(*served, make_factory(setup, image_fds, other_fds));
  const EngineFactory& make_engine = served->factory;
  std::vector<BackendQueue> queues;
  std::vector<iovec> pools;
  for (HostedQueue& queue : *hosted) {
    BackendQueue backend;
    backend.ring = queue.device.ring.get();
    backend.grants = queue.device.grants.get();
    backend.kick = queue.kick.get();
    // Interrupts always go through the eventfd: the frontend's handler is
    // in the daemon. (A broken ring is simply no longer served here.)
    backend.irq = queue.irq.get();
    backend.stats = &queue.stats->stats();
    backend.ring_slots = setup.queue.ring_size;
    backend.disk = setup.queue.disk;
    backend.index = static_cast<uint32_t>(queues.size());
    queues.push_back(backend);
    pools.push_back(queue.device.pool);
  }
  PVDISK_ASSIGN_OR_RETURN(
      *group,
      MakeBackendGroup(std::move(queues), pools, setup.backend_threads,
                       setup.queue.ring_size, setup.backend, make_engine));
  return absl::OkStatus();
}

}  // namespace

int RunBackendHost(int socket, const EngineFactoryMaker& make_factory) {
  // exec of /proc/self/exe named the process "exe": it is pvdisk (tools
  // find pvdisk processes by that name); the threads doing the work are
  // "pvdisk-backend".
  prctl(PR_SET_NAME, "pvdisk");
  // The engines' maker first: it outlives the loops that use it.
  BackendEngines engines;
  std::vector<HostedQueue> hosted;
  BackendGroup group;
  BackendReady ready;
  absl::Status served = Serve(socket, make_factory, &hosted, &group, &engines);
  ready.writer = engines.writer;
  ready.ok = served.ok();
  if (!served.ok()) {
    ready.error = std::string(served.message());
    LogInfo("backend process: %s", ready.error);
    (void)SendPacket(socket, EncodeReady(ready), {});
    return 1;
  }
  for (auto& loop : group.loops) loop->Start();
  ready.engine_mode = group.loops[0]->engine_mode();
  ready.engine_depth = group.engine_depth;
  ready.fixed_buffers = group.loops[0]->uses_fixed_buffers();
  if (!SendPacket(socket, EncodeReady(ready), {}).ok()) {
    // The daemon is gone: nothing will come to the rings.
    return 0;
  }
  // From here the daemon sends only control requests, and closes the
  // socket (or dies, which closes it too) when the backend is to stop.
  for (;;) {
    absl::StatusOr<Packet> packet = ReceivePacket(socket, -1);
    if (!packet.ok()) break;
    CloseFds(*packet);
    absl::StatusOr<ControlMessage> request = DecodeControl(packet->payload);
    if (!request.ok()) break;  // not the daemon's: stop talking
    ControlMessage answer;
    answer.seq = request->seq;
    if (!request->body.ok()) {
      answer.body = request->body.status();
    } else if (engines.control) {
      answer.body = engines.control(*request->body);
    } else {
      answer.body = absl::UnimplementedError(
          "this backend process takes no control request");
    }
    if (!SendPacket(socket, EncodeControl(answer), {}).ok()) break;
  }
  // Each loop answers what it took and leaves once its rings are empty.
  for (auto& loop : group.loops) loop->Stop();
  if (engines.stopped) engines.stopped();
  FlushEventLog();
  return 0;
}

}  // namespace pvdisk::transport::process
