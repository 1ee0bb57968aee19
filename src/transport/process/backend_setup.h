// What the daemon tells a backend process (the setup packet) and what the
// backend answers once it serves the rings (the ready packet). The setup
// packet carries the disk's image files as descriptors (SCM_RIGHTS), the
// daemon's own opens of them: a backend never opens an image by its name,
// which may name another file by the time a backend (re)starts. After the
// setup packet come one packet per queue with that queue's descriptors, in
// the order of QueueFd.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/log_sink.h"
#include "transport/backend_loop.h"
#include "transport/process/wire.h"
#include "transport/queue.h"

namespace pvdisk::transport::process {

struct BackendSetup {
  // What every queue of the disk shares (protocol, ring size, segments,
  // persistent grants, notification, disk size, read-only, serial). The
  // staging policy and the interrupt mode are the frontend's business.
  QueueOptions queue;
  uint32_t queues = 1;
  uint32_t backend_threads = 1;
  BackendOptions backend;
  // How the backend makes its engines, opaque to the transport: the
  // EngineFactoryMaker given to RunBackendHost() reads it (the pvdisk binary
  // puts the --disk argument and --engine there; see
  // cli/backend_command.cc).
  std::string engine_config;
  // The byte of the image the backend holds locked while it lives (see
  // io_fence.h), on its open of the first image file (if it has one).
  uint64_t fence_byte = 0;
  // How many descriptors the setup packet carries: the files the disk is
  // made of, in the order the image layer stacks them (a raw image is one
  // file; a backing chain would be its top file first, then the files
  // below). The backend checks it received exactly that many. None for an
  // image the backend opens itself (RBD): then there is no I/O fence here,
  // the image has its own (see image::Image::CheckServedElsewhere).
  uint32_t image_files = 0;
  // How many descriptors follow the image files in the setup packet: files
  // the disk writes besides its image, opened by the daemon (its write
  // log, `--disk IMG,log=FILE`). The EngineFactoryMaker knows their order.
  uint32_t other_files = 0;
  // Where the backend writes its log lines: the daemon's target; a log file
  // is the backend's stderr (the daemon's log descriptor, inherited).
  LogTarget log_target = LogTarget::kStderr;
};

// The descriptors of one queue, in their order in its packet.
enum QueueFd : size_t {
  kRegionFd = 0,  // the shared region (memfd): ring and data pages
  kStatsFd,       // the queue's counters (SharedStats)
  kKickFd,        // frontend -> backend notifications
  kIrqFd,         // backend -> frontend notifications
  kQueueFdCount,
};

// Most image files one disk may have: all go in the setup packet.
inline constexpr uint32_t kMaxImageFiles = kMaxPacketFds - 1;
// Most other files (BackendSetup::other_files) beside them.
inline constexpr uint32_t kMaxOtherFiles = kMaxPacketFds - kMaxImageFiles;

std::string EncodeSetup(const BackendSetup& setup);
absl::StatusOr<BackendSetup> DecodeSetup(std::string_view payload);

// The backend's answer: it serves the rings (ok) or could not set up
// (error, with the reason).
struct BackendReady {
  bool ok = false;
  std::string error;
  std::string engine_mode;
  uint32_t engine_depth = 0;
  bool fixed_buffers = false;
  // How the image knows this backend as a writer, for fencing it off once
  // it is dead (BackendProcessOptions::fence_dead_writer): an RBD client's
  // address; empty for an image of files, which the I/O fence covers.
  std::string writer;
};

std::string EncodeReady(const BackendReady& ready);
absl::StatusOr<BackendReady> DecodeReady(std::string_view payload);

// Once the backend serves, the daemon may send control requests, one
// packet each, and the backend answers each with one packet: the
// handler's answer (BackendEngines::control, backend_host.h) or its error,
// status code and message kept (the daemon maps them to errnos). Each
// answer carries its request's number, so that the answer of a request
// the daemon stopped waiting for is never taken for a later one's. The
// request's text is the handler's business.
struct ControlMessage {
  uint64_t seq = 0;
  // A request's text, or an answer (its text when ok).
  absl::StatusOr<std::string> body;
};
std::string EncodeControl(const ControlMessage& message);
absl::StatusOr<ControlMessage> DecodeControl(std::string_view payload);

}  // namespace pvdisk::transport::process
