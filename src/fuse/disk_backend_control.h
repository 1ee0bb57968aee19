// A disk's volatile write cache (cache=volatile) and write log (log=FILE)
// under --backend process: both live in the disk's backend process, where
// the I/O is done, made with its engines over the files the I/O goes to
// (cli/backend_command.cc). The daemon reaches them with control requests
// over the backend's socket (BackendSupervisor::Control): the power cut,
// a mark, their counters and their reset. This file holds both ends: the
// backend's handler (DiskBackendControl) and the daemon's calls (Remote*).
//
// Why the backend and not the daemon: the cache must sit between the
// engines and the image (it withholds writes from the image and overlays
// reads), and the log must see each write as it completes; both are on the
// backend's side of the rings. Keeping them in the daemon would mean a
// second copy of every write across the process boundary.
//
// Why the socket and not shared memory for the counters: they are read
// only when the stats are (a few times a second at most), the socket is
// there already, and a dead backend then simply does not answer: the
// daemon shows the counts it read last.
//
// A request is one line of words; the answer is text the daemon decodes
// here (numbers as WireWriter writes them):
//   powercut none|all|random SEED -> the PowerCutResult
//   mark NAME (the rest of the line) -> nothing
//   counts                        -> BackendDiskCounts
//   reset                         -> nothing
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "image/image.h"
#include "io/volatile_cache.h"
#include "io/write_log.h"
#include "transport/process/backend_supervisor.h"

namespace pvdisk::fuse {

// The counts of a backend's cache and log (zeros for one it has not).
struct BackendDiskCounts {
  io::VolatileCacheCounts cache;
  io::WriteLogCounts log;
  std::string log_failed;  // io::WriteLog::failed()
};

// How long the daemon waits for an answer: a power cut writes out what
// --keep keeps (up to cache_size bytes); the rest answer at once.
inline constexpr std::chrono::milliseconds kPowerCutAnswerTimeout{120'000};
inline constexpr std::chrono::milliseconds kControlAnswerTimeout{5'000};

// The backend's side: answers the daemon's requests about `cache` and
// `log` (either may be null) of `image`.
class DiskBackendControl {
 public:
  DiskBackendControl(std::shared_ptr<image::Image> image,
                     std::shared_ptr<io::VolatileCache> cache,
                     std::shared_ptr<io::WriteLog> log);
  // BackendEngines::control. InvalidArgument for a request it does not
  // know; FailedPrecondition for a power cut without a cache (or a second
  // one) or a mark without a log; the cache's and the log's own errors.
  absl::StatusOr<std::string> Handle(std::string_view request);
  // BackendEngines::stopped, at a clean stop of the backend: what the
  // daemon's Disk::Shutdown does in --backend thread: writes the cache
  // out, flushes the image (a qcow2 image's metadata goes through the
  // cache, and out with it), closes the log (its end mark). Each failure
  // is logged.
  void Stopped();

 private:
  const std::shared_ptr<image::Image> image_;
  const std::shared_ptr<io::VolatileCache> cache_;
  const std::shared_ptr<io::WriteLog> log_;
};

// The daemon's side. Each sends one request to the disk's backend and
// decodes its answer; a backend that is not running, dies or does not
// answer in time gives Unavailable or DeadlineExceeded (never a hang).
absl::StatusOr<io::PowerCutResult> RemotePowerCut(
    transport::process::BackendSupervisor& backend, io::PowerKeep keep,
    uint64_t seed);
absl::Status RemoteMark(transport::process::BackendSupervisor& backend,
                        std::string_view name);
absl::StatusOr<BackendDiskCounts> RemoteCounts(
    transport::process::BackendSupervisor& backend);
absl::Status RemoteResetCounts(transport::process::BackendSupervisor& backend);

}  // namespace pvdisk::fuse
