// The backend process's side (`pvdisk __backend`, started by a
// BackendSupervisor): receives one disk's setup and, per queue, only what a
// Xen blkback shares with its frontend (the ring and data pages as a memfd,
// the kick and interrupt eventfds) plus the queue's counters, and the image
// file(s) as the daemon opened them (never a name to open), makes its
// engines over them (through the EngineFactoryMaker), serves the rings with the
// same BackendLoops the daemon runs in --backend thread, and ends when the
// daemon closes the socket. It knows nothing else of the daemon: the
// process was exec'd, so none of the daemon's memory is mapped here.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/process/backend_setup.h"
#include "transport/transport.h"

namespace pvdisk::transport::process {

// Makes the engine factory of the disk `setup` describes (its
// engine_config) over `image_fds`, the daemon's opens of the image files
// (setup.image_files of them, in the order of BackendSetup::image_files),
// and holds the fence (io_fence.h) on its own open of the first one.
// `other_fds` are the other files of the disk (setup.other_files of them:
// its write log). The descriptors are closed once it returns: what it
// keeps, it opens again from them (image::OpenImageFromFiles) or dup()s,
// which is also how it gets an open file description of its own for the
// fence.
struct BackendEngines {
  EngineFactory factory;
  // BackendReady::writer: how the image knows this process as a writer.
  std::string writer;
  // Answers a control request of the daemon (see EncodeControl,
  // backend_setup.h), on the process's main thread, one at a time. Null: every
  // request is refused (Unimplemented).
  std::function<absl::StatusOr<std::string>(std::string_view request)> control;
  // At a clean stop, once every loop has answered what it took: makes
  // durable what the engines hold beyond the image (a volatile write
  // cache's held writes, a write log's end). Not called when the process
  // dies. May be null.
  std::function<void()> stopped;
};
using EngineFactoryMaker = std::function<absl::StatusOr<BackendEngines>(
    const BackendSetup& setup, const std::vector<int>& image_fds,
    const std::vector<int>& other_fds)>;

// Serves the disk over `socket` (a connected SOCK_SEQPACKET socket) until
// the daemon closes it. Returns the process exit code: 0 after a clean stop,
// 1 when the setup failed (the reason was sent to the daemon and printed).
int RunBackendHost(int socket, const EngineFactoryMaker& make_factory);

}  // namespace pvdisk::transport::process
