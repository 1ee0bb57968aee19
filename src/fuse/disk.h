// Disk: one image as the mount serves it: the open image (image/image.h),
// its queue(s) with the engines the image makes, and what the stats file
// shows about it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fuse/channel/channel_options.h"
#include "fuse/disk_backend_control.h"
#include "fuse/operations_in_flight.h"
#include "image/image.h"
#include "image/image_spec.h"
#include "io/engine_factory.h"
#include "io/rbd_spec.h"
#include "io/volatile_cache.h"
#include "io/write_log.h"
#include "stats/render.h"
#include "trace/queue_trace.h"
#include "transport/process/backend_supervisor.h"
#include "transport/transport.h"

namespace pvdisk::fuse {

// One --disk argument.
struct DiskSpec {
  // The image file, or "rbd:POOL/IMAGE" when `rbd` is set.
  std::string path;
  // An RBD image instead of a file (--disk rbd:POOL/IMAGE,...): served by the
  // rbd engine whatever DiskOptions::engine says.
  std::optional<io::RbdSpec> rbd;
  bool read_only = false;
  std::optional<uint64_t> expected_size;  // ",size=": must match the image
  std::optional<io::FaultRange> fault;    // ",eio=": inject -EIO there
  // ",delay=US[,delay-write=US]": hold completions (a device latency model).
  std::optional<io::CompletionDelay> delay;
  // ",lock=off" clears it: take no image lock (see io/image_lock.h).
  bool lock = true;
  // ",l2_cache=SIZE": a qcow2 image's L2 cache per layer; 0: the default
  // (image::ImageSpec::l2_cache_bytes).
  uint64_t l2_cache_bytes = 0;
  // ",snapshot=NAME": serve a qcow2 image's internal snapshot (read-only).
  std::string snapshot;
  // ",format=raw|qcow2"; kProbe when not given.
  image::ImageFormat format = image::ImageFormat::kProbe;
  // ",cache=volatile": a volatile write cache that a power cut empties
  // (io/volatile_cache.h); `cache_bytes` (",cache_size=SIZE") bounds it.
  bool cache_volatile = false;
  uint64_t cache_bytes = io::kDefaultVolatileCacheBytes;
  // ",log=FILE": the write log (io/write_log.h); empty for none. Made
  // absolute by CheckDiskList.
  std::string log_path;
  // The --disk argument as given, for a backend process to parse again.
  std::string arg;
};

// Where each disk's backend runs (--backend).
enum class BackendMode {
  kThread,   // backend threads in the daemon
  kProcess,  // a backend process per disk (transport/process/)
};

// --shutdown-timeout: how long shutdown waits for a disk's I/O in flight
// before it gives up on it (Disk::Shutdown), in seconds.
inline constexpr uint32_t kDefaultShutdownTimeoutSeconds = 30;
inline constexpr uint32_t kMinShutdownTimeoutSeconds = 1;
inline constexpr uint32_t kMaxShutdownTimeoutSeconds = 86400;
// --backend-restart-limit at most.
inline constexpr uint32_t kMaxBackendRestartLimit = 1000;

// Settings shared by every disk of a mount.
struct DiskOptions {
  io::EngineKind engine = io::EngineKind::kUring;
  // Queues, rings, segments, notification and backend settings. The
  // per-disk fields (queue.name, queue.disk_sectors, queue.read_only) are
  // filled in by Disk::Open.
  transport::TransportOptions transport;
  // How FUSE requests reach the disks (the mount's FUSE channel, its
  // arena granted to the backends), for the stats header.
  channel::ChannelOptions fuse_channel;
  BackendMode backend = BackendMode::kThread;
  // --backend process: deaths per minute before the disk fails with EIO.
  uint32_t backend_restart_limit = 5;
  // --backend process: whether backend processes write to the daemon's
  // stderr (false for a daemon that detaches from its terminal).
  bool backend_keeps_stderr = true;
  // --shutdown-timeout, for a Shutdown() without a deadline of its own.
  uint32_t shutdown_timeout_seconds = kDefaultShutdownTimeoutSeconds;
};

// The image `spec` names, to be served by `engine` (--engine; an RBD image
// has its own).
image::ImageSpec ImageSpecOf(const DiskSpec& spec, io::EngineKind engine);

// How the backend of a disk makes its engines: the image's (Image::
// MakeEngine), with `spec`'s fault injection and delay. The factory holds
// the image, which so outlives every engine made. Used by the daemon
// (Disk::Open) and by a backend process (cli/backend_command.cc).
// `cache`: the disk's volatile write cache (cache=volatile), or null;
// `write_log`: its write log (log=FILE), or null.
transport::EngineFactory EngineFactoryFor(
    const DiskSpec& spec, std::shared_ptr<image::Image> image,
    std::shared_ptr<io::VolatileCache> cache = nullptr,
    std::shared_ptr<io::WriteLog> write_log = nullptr);

// The volatile write cache of the disk `spec` names (cache=volatile), over
// the file its writes go to: a qcow2 image makes its own (its metadata
// goes through it too), a raw image's is over its file. Made where the
// disk's I/O is done: by Disk::Open with --backend thread, by the backend
// process (cli/backend_command.cc) with --backend process.
absl::StatusOr<std::shared_ptr<io::VolatileCache>> MakeVolatileCache(
    const DiskSpec& spec, image::Image& image);

// What a backend process gets in BackendSetup::engine_config: the --disk
// argument as given (for its options; its path only names the image in
// messages, an image of files itself goes as descriptors), the --engine,
// and for an RBD image, which the backend opens itself, the spec as the
// daemon resolved it (conf= made absolute) and the image's identity (its
// librbd id, checked by image::OpenSameImage). Read back by
// DecodeEngineConfig.
std::string EncodeEngineConfig(const DiskSpec& spec, io::EngineKind kind,
                               const std::string& identity);
struct EngineConfig {
  std::string disk_arg;
  io::EngineKind engine = io::EngineKind::kUring;
  std::optional<io::RbdSpec> rbd;
  std::string identity;
};
absl::StatusOr<EngineConfig> DecodeEngineConfig(std::string_view config);

class Disk {
 public:
  // Opens the image and builds its queue. `name` is the file name in the
  // mount. Errors name the image and what is wrong.
  static absl::StatusOr<std::unique_ptr<Disk>> Open(const DiskSpec& spec,
                                                    const std::string& name,
                                                    const DiskOptions& options);
  ~Disk();

  // Starts the queue threads.
  void Start();
  // Once the disk serves (its mount is up, or its attach is done): puts the
  // files it made in place (the write log: io::WriteLog::Publish). Before
  // that they have temporary names, and a disk destroyed without serving
  // leaves nothing behind. A failure is logged; the disk serves on.
  void Serving();
  // Waits for every operation DiskIo has accepted to be answered (including
  // writes still waiting for the write order and read-modify-writes between
  // their read and their write), then for the queues to drain, stops the
  // threads, and makes what was written durable (Image::Flush) and frees
  // the image (Image::Release). Idempotent.
  // Call it only once nothing can start new operations (the FUSE loop has
  // ended).
  //
  // It waits until `deadline` at most. What is still in flight then is
  // abandoned: a backend process is killed (SIGKILL), every request left
  // fails with EIO (so each FUSE caller gets its answer), one line on
  // stderr says how many requests and bytes were given up, and abandoned()
  // becomes true. The image is then neither flushed (it does not answer)
  // nor released by hand: its lock goes with the last reference to the
  // open file, which I/O still in the kernel holds.
  // Contract after abandoning: an engine may still hold the requests and
  // write into their pages, so the disk's transport and image are never
  // freed (destroying the Disk leaks them), and the caller must end the
  // process without unmapping memory those requests may use (the FUSE
  // payload arena): pvdisk mount _exits once the mount is gone.
  void Shutdown(std::chrono::steady_clock::time_point deadline);
  // Shutdown() with the deadline --shutdown-timeout from now.
  void Shutdown();
  // Whether Shutdown() gave up on I/O in flight.
  bool abandoned() const { return abandoned_; }
  uint32_t shutdown_timeout_seconds() const {
    return options_.shutdown_timeout_seconds;
  }

  const std::string& name() const { return name_; }
  // The image's virtual size: the disk's.
  uint64_t size_bytes() const { return image_->size_bytes(); }
  bool read_only() const { return image_->read_only(); }
  // The image's owner, group, mode and times when it was opened (see
  // Image::attributes).
  const struct stat& image_stat() const { return image_->attributes(); }

  // The queue for a request starting at `sector` (the --queue-map policy).
  transport::Queue& QueueFor(uint64_t sector) {
    return transport_->QueueFor(sector);
  }

  // The inline placement: see Transport::AttachDriven.
  absl::StatusOr<transport::Transport::Driven> AttachDriven(
      uint32_t q, io::RingLender* lender, transport::KickHandler* kicks) {
    return transport_->AttachDriven(q, lender, kicks);
  }
  const transport::TransportOptions& transport_options() const {
    return transport_->options();
  }
  // The I/Os beyond `depth` ring slots that an engine of this disk's image
  // may issue (image::ExtraIosFor): what its engines are made with on top
  // of their depth.
  uint32_t EngineExtraIos(uint32_t depth) const {
    return image::ExtraIosFor(*image_, depth);
  }

  // What DiskIo counts, so that Shutdown can wait for it.
  OperationsInFlight& operations() { return operations_; }

  // Each queue's trace, in queue order (trace/queue_trace.h).
  std::vector<trace::QueueTrace*> QueueTraces();

  stats::DiskReport Report() const;
  void ResetStats();

  // The power cut of a disk with cache=volatile (io/volatile_cache.h):
  // from now on every request fails with EIO, and the image gets the
  // unflushed writes `keep` says. FailedPrecondition, naming the disk, for
  // a disk without the cache or one already cut (by `pvdisk powercut`, or
  // by the death of its backend process). With --backend process the cut
  // is the backend's (fuse/disk_backend_control.h); Unavailable or
  // DeadlineExceeded when it cannot be reached.
  absl::StatusOr<io::PowerCutResult> PowerCut(io::PowerKeep keep,
                                              uint64_t seed);
  bool has_volatile_cache() const { return cache_volatile_; }

  // Appends a mark named `name` to the disk's write log (log=FILE).
  // FailedPrecondition, naming the disk, for a disk without a log;
  // InvalidArgument for a name a mark cannot have.
  absl::Status Mark(std::string_view name);
  bool has_write_log() const { return write_log_ != nullptr; }

 private:
  Disk() = default;

  std::string name_;
  DiskOptions options_;
  // What the disk serves. Shared with the engine factory of transport_,
  // and declared before it: it outlives every engine it made.
  std::shared_ptr<image::Image> image_;
  std::optional<io::CompletionDelay> delay_;  // for the stats header
  // cache=volatile (and its cache_size=).
  bool cache_volatile_ = false;
  uint64_t cache_bytes_ = 0;
  // cache=volatile with --backend thread; shared with the engines. With
  // --backend process the cache lives in the backend process (see
  // fuse/disk_backend_control.h).
  std::shared_ptr<io::VolatileCache> cache_;
  // log=FILE only; shared with the engines. With --backend process this
  // is the daemon's hand of it (io::WriteLog::HandOff: the file, made and
  // published here, appended to by the backend process).
  std::shared_ptr<io::WriteLog> write_log_;
  // --backend process with a cache or a log: their counts as the backend
  // last told them, shown when it cannot answer (it died).
  mutable std::mutex remote_mu_;
  mutable BackendDiskCounts remote_counts_;
  // What the power cut did, for the stats header (cache_ only).
  mutable std::mutex cut_mu_;
  std::optional<io::PowerCutResult> cut_result_;
  std::unique_ptr<transport::Transport> transport_;
  // --backend process only: the backend process and its watcher.
  std::unique_ptr<transport::process::BackendSupervisor> supervisor_;
  OperationsInFlight operations_;
  bool shut_down_ = false;
  bool abandoned_ = false;

  // Shutdown's giving up: kills the backend process, fails the queues'
  // I/O with EIO and logs what was given up.
  void Abandon();
  // --backend process: whether the backend died holding the cache or the
  // log, and the disk so lost its power (BackendProcessOptions::
  // lost_on_death).
  bool lost_with_backend() const;
  // The cache's and the log's counts, wherever they live.
  BackendDiskCounts CacheAndLogCounts() const;
};

}  // namespace pvdisk::fuse
