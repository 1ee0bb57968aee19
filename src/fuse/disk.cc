#include "fuse/disk.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/size.h"
#include "base/status_macros.h"
#include "image/image_headers.h"
#include "image/open_image.h"
#include "image/qcow2_image.h"
#include "image/raw_image.h"
#include "io/test_fault.h"
#include "transport/nvme/protocol.h"
#include "transport/process/wire.h"

namespace pvdisk::fuse {
namespace {

// A stable serial number for the image (what virtio's GET_ID returns):
// "pvdisk-" and 12 hex digits of a hash of where it is (path or
// rbd:POOL/IMAGE), its identity (inode, or librbd's image id) and size, so the
// same image gives the same serial across mounts.
std::string SerialOf(const std::string& where, const std::string& identity,
                     uint64_t size_bytes) {
  size_t hash = std::hash<std::string>()(
      absl::StrCat(where, "\n", identity, "\n", size_bytes));
  return absl::StrFormat("pvdisk-%012x", hash & 0xffffffffffffULL);
}

// What every engine of the disk gets from its --disk spec (the depth and
// the ring come per engine).
io::EngineOptions BaseEngineOptions(const DiskSpec& spec, io::EngineKind kind) {
  io::EngineOptions options;
  options.kind = kind;
  options.fault = spec.fault;
  options.delay = spec.delay;
  return options;
}

// cache=volatile serves an image of files (raw, or qcow2 served writable)
// through an engine that writes it; the cache lives where the I/O is done
// (the daemon's backend threads, or the disk's backend process).
absl::Status CheckVolatileCache(const DiskSpec& spec,
                                const image::Image& image) {
  auto refuse = [&spec](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--disk ", spec.path, ": cache=volatile ", why));
  };
  if (spec.rbd) return refuse("serves image files, not rbd: images");
  if (dynamic_cast<const image::RawImage*>(&image) == nullptr &&
      dynamic_cast<const image::Qcow2Image*>(&image) == nullptr) {
    return refuse("serves raw and qcow2 images");
  }
  if (dynamic_cast<const image::Qcow2Image*>(&image) != nullptr &&
      image.read_only()) {
    return refuse(
        "needs a qcow2 image served writable (not ro or snapshot=): its "
        "metadata is what the cache holds besides the data");
  }
  if (image.engine() == io::EngineKind::kNull) {
    return refuse("needs an engine that writes the image (uring or sync)");
  }
  return absl::OkStatus();
}

// The nvme frontend's own settings (--nvme-data, --irq-coalesce), for its
// disk's configuration after the notification scheme they refine.
std::vector<std::pair<std::string, std::string>> NvmeConfig(
    const transport::QueueOptions& queue) {
  const transport::IrqCoalesce& coalesce = queue.irq_coalesce;
  return {
      {"nvme_data",
       queue.nvme_data == transport::DataPointerMode::kPrp ? "prp" : "sgl"},
      {"irq_coalesce",
       coalesce.threshold == 0
           ? std::string("off")
           : absl::StrCat(coalesce.threshold, ",", coalesce.time_us)},
  };
}

// What dies with the backend process of a disk with a cache or a log: its
// death is then the disk's power cut (BackendProcessOptions::lost_on_death),
// not a restart. Empty for a disk with neither.
//
// The cache: its held writes completed and were answered; a new backend
// replaying only the unanswered requests would serve on without them,
// which no disk does without losing power. The log: entries after its
// superblock's last update (the last flush or mark) may have been written
// by the dead backend or not, and one torn by the death cannot be told
// from a whole one (entries carry no checksum); a new backend appending
// after them could not keep the log exact. So the log ends there, as a
// dm-log-writes log ends when the power goes: its superblock counts the
// entries up to the last flush or mark, every one of them whole, which is
// all a replay to a flush or a mark needs.
std::string LostOnDeath(const DiskSpec& spec) {
  if (spec.cache_volatile && !spec.log_path.empty()) {
    return "its volatile write cache and its write log's tail went";
  }
  if (spec.cache_volatile) return "its volatile write cache went";
  if (!spec.log_path.empty()) return "its write log's tail went";
  return std::string();
}

}  // namespace

absl::StatusOr<std::shared_ptr<io::VolatileCache>> MakeVolatileCache(
    const DiskSpec& spec, image::Image& image) {
  PVDISK_ASSIGN_OR_RETURN(const io::TestFault test_fault,
                          io::TestFaultFromEnvironment());
  if (auto* qcow2 = dynamic_cast<image::Qcow2Image*>(&image)) {
    return qcow2->MakeVolatileCache(spec.cache_bytes, test_fault.lying_flush);
  }
  return std::make_shared<io::VolatileCache>(
      image.files()[0], image.name(), spec.cache_bytes, test_fault.lying_flush);
}

image::ImageSpec ImageSpecOf(const DiskSpec& spec, io::EngineKind engine) {
  image::ImageSpec image;
  image.path = spec.path;
  image.rbd = spec.rbd;
  image.read_only = spec.read_only;
  image.lock = spec.lock;
  image.engine = engine;
  image.l2_cache_bytes = spec.l2_cache_bytes;
  image.snapshot = spec.snapshot;
  image.format = spec.format;
  return image;
}

transport::EngineFactory EngineFactoryFor(
    const DiskSpec& spec, std::shared_ptr<image::Image> image,
    std::shared_ptr<io::VolatileCache> cache,
    std::shared_ptr<io::WriteLog> write_log) {
  // Backends call this again to replace a failed engine: it owns what it
  // captures.
  io::EngineOptions base_engine_options =
      BaseEngineOptions(spec, image->engine());
  base_engine_options.volatile_cache = std::move(cache);
  base_engine_options.write_log = std::move(write_log);
  return [image = std::move(image), base_engine_options](
             uint32_t depth, io::RingLender* lender) {
    io::EngineOptions engine_options = base_engine_options;
    engine_options.depth = depth;
    // Room for the I/Os the image's engine issues beyond its requests.
    engine_options.extra_ios = image::ExtraIosFor(*image, depth);
    engine_options.ring_lender = lender;
    return image->MakeEngine(engine_options);
  };
}

std::string EncodeEngineConfig(const DiskSpec& spec, io::EngineKind kind,
                               const std::string& identity) {
  transport::process::WireWriter out;
  out.PutString(io::EngineKindName(kind));
  out.PutString(spec.arg);
  out.PutString(identity);
  out.PutU64(spec.rbd ? 1 : 0);
  if (spec.rbd) {
    out.PutString(spec.rbd->pool);
    out.PutString(spec.rbd->image);
    out.PutString(spec.rbd->conf);
    out.PutString(spec.rbd->id);
    out.PutU64(spec.rbd->timeout_seconds);
  }
  return out.data();
}

absl::StatusOr<EngineConfig> DecodeEngineConfig(std::string_view config) {
  transport::process::WireReader in(config);
  EngineConfig decoded;
  std::string engine;
  uint64_t has_rbd = 0;
  if (!in.GetString(&engine) || !in.GetString(&decoded.disk_arg) ||
      !in.GetString(&decoded.identity) || !in.GetU64(&has_rbd)) {
    return absl::InvalidArgumentError("malformed engine configuration");
  }
  PVDISK_ASSIGN_OR_RETURN(decoded.engine, io::ParseEngineKind(engine));
  if (has_rbd != 0) {
    io::RbdSpec& rbd = decoded.rbd.emplace();
    uint64_t timeout = 0;
    if (!in.GetString(&rbd.pool) || !in.GetString(&rbd.image) ||
        !in.GetString(&rbd.conf) || !in.GetString(&rbd.id) ||
        !in.GetU64(&timeout) || timeout == 0 ||
        timeout > io::kMaxRbdTimeoutSeconds) {
      return absl::InvalidArgumentError("malformed engine configuration");
    }
    rbd.timeout_seconds = static_cast<uint32_t>(timeout);
  }
  return decoded;
}

absl::StatusOr<std::unique_ptr<Disk>> Disk::Open(const DiskSpec& spec,
                                                 const std::string& name,
                                                 const DiskOptions& options) {
  std::unique_ptr<Disk> disk(new Disk());
  disk->name_ = name;
  disk->options_ = options;
  disk->delay_ = spec.delay;
  const bool in_process = options.backend == BackendMode::kProcess;
  PVDISK_ASSIGN_OR_RETURN(disk->image_,
                          image::OpenImage(ImageSpecOf(spec, options.engine)));
  disk->options_.engine = disk->image_->engine();
  if (in_process) {
    if (absl::Status fenced = disk->image_->CheckServedElsewhere();
        !fenced.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--disk ", spec.path, ": ", fenced.message()));
    }
  }
  if (spec.cache_volatile) {
    PVDISK_RETURN_IF_ERROR(CheckVolatileCache(spec, *disk->image_));
    disk->cache_volatile_ = true;
    disk->cache_bytes_ = spec.cache_bytes;
    // With --backend process the backend makes it, over its own open of
    // the image (cli/backend_command.cc).
    if (!in_process) {
      PVDISK_ASSIGN_OR_RETURN(disk->cache_,
                              MakeVolatileCache(spec, *disk->image_));
    }
  }
  if (!spec.log_path.empty()) {
    // Made here in both modes, so that a log that cannot be written fails
    // the mount, and published here once the disk serves. With --backend
    // process the backend appends to it (it gets the open file).
    absl::StatusOr<std::shared_ptr<io::WriteLog>> log =
        io::WriteLog::Create(spec.log_path);
    if (!log.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--disk ", spec.path, ",log=", spec.log_path, ": ",
                       log.status().message()));
    }
    disk->write_log_ = std::move(*log);
    if (in_process) disk->write_log_->HandOff();
  }
  const std::string serial =
      SerialOf(disk->image_->name(), disk->image_->identity(),
               disk->image_->size_bytes());
  // The one way this disk makes engines, whichever image it serves.
  transport::EngineFactory make_engine =
      EngineFactoryFor(spec, disk->image_, disk->cache_,
                       in_process ? nullptr : disk->write_log_);
  if (spec.expected_size && *spec.expected_size != disk->size_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--disk ", spec.path, ",size=", FormatSize(*spec.expected_size),
        " does not match the image, which has ", disk->size_bytes(), " bytes"));
  }

  transport::TransportOptions transport_options = options.transport;
  transport_options.queue.name = absl::StrCat("pvdisk-", name);
  transport_options.queue.disk = name;
  transport_options.queue.disk_sectors = disk->image_->size_sectors();
  transport_options.queue.read_only = spec.read_only;
  transport_options.queue.serial = serial;
  if (disk->image_->refuses_header_writes()) {
    transport_options.queue.policy.refuse_first_sector =
        &image::HoldsImageHeader;
  }
  if (in_process) {
    // The backend lives in another process: it cannot run the frontend's
    // interrupt handler, so interrupts go through the eventfd.
    transport_options.backend_elsewhere = true;
    transport_options.queue.irq = transport::InterruptMode::kThread;
  }
  PVDISK_ASSIGN_OR_RETURN(
      disk->transport_,
      transport::Transport::Create(transport_options, make_engine));
  if (in_process) {
    transport::process::BackendProcessOptions process;
    process.label = spec.path;
    process.restart_limit = options.backend_restart_limit;
    process.keep_stderr = options.backend_keeps_stderr;
    // The backend gets an image of files as this open of it, never as a
    // path: the path may name another file, or none, by the time a backend
    // restarts. An RBD image has no files: the backend opens it by name and
    // checks its id (image::OpenSameImage).
    process.image_fds = disk->image_->files();
    process.engine_config =
        EncodeEngineConfig(spec, options.engine, disk->image_->identity());
    if (disk->write_log_) process.other_fds = {disk->write_log_->fd()};
    process.lost_on_death = LostOnDeath(spec);
    process.fence_dead_writer = [image =
                                     disk->image_](const std::string& writer) {
      return image->FenceDeadWriter(writer);
    };
    PVDISK_ASSIGN_OR_RETURN(disk->supervisor_,
                            transport::process::BackendSupervisor::Start(
                                disk->transport_.get(), process));
  }
  return disk;
}

Disk::~Disk() { Shutdown(); }

void Disk::Start() { transport_->Start(); }

void Disk::Serving() {
  if (!write_log_) return;
  if (absl::Status published = write_log_->Publish(); !published.ok()) {
    LogInfo("%s", published.message());
  }
}

void Disk::Shutdown() {
  Shutdown(std::chrono::steady_clock::now() +
           std::chrono::seconds(options_.shutdown_timeout_seconds));
}

void Disk::Shutdown(std::chrono::steady_clock::time_point deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  // First everything DiskIo accepted: an operation that has not reached a
  // queue yet (an unaligned write waiting behind another one, or between its
  // read and its write) would otherwise submit to a queue already drained,
  // or stopped, and never be answered. Only then may the queues drain one
  // after another and stop. (Before Start() nothing can be in flight.)
  bool drained = operations_.WaitForZeroUntil(deadline);
  // Open() may have failed half-way: only what exists is shut down.
  if (drained && transport_) drained = transport_->Drain(deadline);
  if (!drained && transport_) Abandon();
  if (transport_) transport_->Shutdown();
  // Drained: the backend process holds nothing and may go.
  if (supervisor_) supervisor_->Stop(deadline);
  if (abandoned_) {
    // Abandon()'s contract (see Shutdown in disk.h): engines may still use
    // the transport's pages and the image's descriptor.
    (void)transport_.release();
    (void)new std::shared_ptr<image::Image>(std::move(image_));
    return;
  }
  if (!image_) return;
  if (cache_) {
    if (absl::Status written = cache_->WriteOutAll(); !written.ok()) {
      LogInfo("%s", written.message());
    }
  }
  if (absl::Status flushed = image_->Flush(); !flushed.ok()) {
    LogInfo("%s", flushed.message());
  }
  // Free the image for the next user as soon as its data is durable.
  image_->Release();
  if (write_log_) {
    if (absl::Status closed = write_log_->Close(); !closed.ok()) {
      LogInfo("%s", closed.message());
    }
  }
}

void Disk::Abandon() {
  abandoned_ = true;
  // The backend process first: once it is dead its watcher restarts
  // nothing, and no answer races with the failing below.
  pid_t killed = supervisor_ ? supervisor_->Abandon() : -1;
  transport::FrontendQueue::Abandoned lost = transport_->Abandon();
  // Every queue now answers at once, so what DiskIo still holds (writes
  // behind an abandoned one in the write order) ends quickly.
  constexpr auto kAnswerGrace = std::chrono::seconds(2);
  bool answered = operations_.WaitForZeroUntil(
      std::chrono::steady_clock::now() + kAnswerGrace);
  LogInfo(
      "shutdown of %s gave up after --shutdown-timeout %u s: abandoned %u "
      "request(s) of %u bytes in flight, failed with EIO%s%s",
      name_, options_.shutdown_timeout_seconds, lost.requests, lost.bytes,
      killed > 0
          ? absl::StrCat("; killed its backend process (pid ", killed, ")")
          : std::string(),
      answered ? "" : "; some FUSE operations are still unanswered");
}

std::vector<trace::QueueTrace*> Disk::QueueTraces() {
  std::vector<trace::QueueTrace*> traces;
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    traces.push_back(&transport_->queue(q).trace());
  }
  return traces;
}

stats::DiskReport Disk::Report() const {
  const transport::TransportOptions& t = transport_->options();
  uint64_t shared_bytes = 0;
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    shared_bytes += transport_->queue(q).region_bytes();
  }
  const channel::ChannelOptions& fc = options_.fuse_channel;
  const bool uring = fc.fuse_io == channel::FuseIo::kUring;
  stats::DiskReport report;
  report.name = name_;
  report.config = {
      {"image", image_->name()},
      {"size", absl::StrCat(size_bytes())},
      {"read_only", read_only() ? "yes" : "no"},
      {"lock", image_->locked() ? "on" : "off"},
      {"frontend", std::string(transport_->queue(0).protocol().name())},
      {"queues", absl::StrCat(t.queues)},
      {"queue_map", std::string(transport::QueueMapName(t.queue_map))},
      {"backend_threads", absl::StrCat(t.backend_threads)},
      {"ring_size", absl::StrCat(t.queue.ring_size)},
      {"ring_pages", absl::StrCat(transport_->queue(0).ring_pages())},
      {"max_segments", absl::StrCat(t.queue.max_segments)},
      {"pool_pages", absl::StrCat(transport_->queue(0).pool_pages())},
      {"shared_bytes", absl::StrCat(shared_bytes)},
      {"persistent", t.queue.persistent ? "on" : "off"},
      {"notify", t.queue.notify == transport::NotifyMode::kEventIdx
                     ? "event-idx"
                     : "always"},
      {"merge", t.queue.policy.merge ? "on" : "off"},
      {"dispatch", t.queue.policy.dispatch == transport::DispatchMode::kAlways
                       ? "always"
                       : "when-room"},
      {"plug_us", absl::StrCat(t.queue.policy.plug_us)},
      {"irq", std::string(transport::InterruptModeName(t.queue.irq))},
      {"poll_us", absl::StrCat(t.backend.poll_us)},
      {"engine", std::string(io::EngineKindName(options_.engine))},
      {"engine_depth", absl::StrCat(supervisor_ ? supervisor_->engine_depth()
                                                : transport_->engine_depth())},
      {"engine_max_inflight",
       t.backend.engine_max_inflight == 0
           ? std::string("none")
           : absl::StrCat(t.backend.engine_max_inflight)},
      {"engine_mode", supervisor_ ? supervisor_->engine_mode()
                                  : std::string(transport_->engine_mode())},
      {"delay_us", delay_ ? absl::StrCat(delay_->us) : std::string("none")},
      {"delay_write_us",
       delay_ ? absl::StrCat(delay_->write_us) : std::string("none")},
      // FUSE payloads granted to the backend as they are (no copy into the
      // data pool; the counter zero_copy_ios says how many I/Os were).
      {"zero_copy", t.queue.lent.empty() ? "no" : "yes"},
      {"fixed_buffers", (supervisor_ ? supervisor_->fixed_buffers()
                                     : transport_->uses_fixed_buffers())
                            ? "yes"
                            : "no"},
      {"fuse_io", std::string(channel::FuseIoName(fc.fuse_io))},
      {"fuse_queues",
       uring ? absl::StrCat(channel::PossibleCpus(), "x", fc.queue_depth)
             : std::string("none")},
      {"fuse_queue_pin", uring
                             ? std::string(channel::QueuePinName(fc.queue_pin))
                             : std::string("none")},
      {"fuse_huge_entries",
       uring ? absl::StrCat(fc.arena ? fc.arena->huge_entries() : 0)
             : std::string("none")},
      // Huge pages of payload entries made huge on first carrying a large
      // request (fuse/channel/huge_promotion.h), so far.
      {"fuse_huge_made",
       uring ? absl::StrCat(fc.arena && fc.arena->promotion()
                                ? fc.arena->promotion()->promoted()
                                : 0)
             : std::string("none")},
      {"fuse_spread",
       uring ? std::string(fc.spread ? "on" : "off") : std::string("none")},
      // Where the backend side of each queue runs: its own thread(s), in
      // the daemon or in a backend process, or the thread of the FUSE queue
      // its requests come from.
      {"placement", supervisor_
                        ? std::string("backend-process")
                        : std::string(transport::PlacementName(t.placement))},
      {"backend", supervisor_ ? "process" : "thread"},
  };
  if (&transport_->queue(0).protocol() == &transport::NvmeProtocol()) {
    auto notify =
        std::find_if(report.config.begin(), report.config.end(),
                     [](const auto& entry) { return entry.first == "notify"; });
    std::vector<std::pair<std::string, std::string>> nvme = NvmeConfig(t.queue);
    report.config.insert(notify + 1, nvme.begin(), nvme.end());
  }
  if (supervisor_) {
    report.config.push_back(
        {"backend_pid", absl::StrCat(supervisor_->backend_pid())});
    report.config.push_back({"backend_state", supervisor_->state()});
    report.config.push_back(
        {"backend_restart_limit", absl::StrCat(supervisor_->restart_limit())});
  }
  for (auto& line : image_->Describe()) report.config.push_back(line);
  report.config.push_back(
      {"cache", cache_volatile_ ? "volatile" : "writethrough"});
  const bool lost = lost_with_backend();
  const BackendDiskCounts counts = CacheAndLogCounts();
  if (cache_volatile_) {
    report.config.push_back({"cache_size", absl::StrCat(cache_bytes_)});
    std::lock_guard<std::mutex> lock(cut_mu_);
    // Cut by `pvdisk powercut`, or by the death of the backend process
    // that held the cache (then nothing says what was dropped: all of it).
    report.config.push_back({"power", cut_result_ || lost ? "cut" : "on"});
    if (cut_result_) {
      report.config.push_back(
          {"cut_dropped_writes", absl::StrCat(cut_result_->dropped_writes)});
      report.config.push_back(
          {"cut_dropped_bytes", absl::StrCat(cut_result_->dropped_bytes)});
      report.config.push_back(
          {"cut_kept_writes", absl::StrCat(cut_result_->kept_writes)});
      report.config.push_back(
          {"cut_kept_bytes", absl::StrCat(cut_result_->kept_bytes)});
    }
  }
  report.config.push_back(
      {"log", write_log_ ? write_log_->path() : std::string("none")});
  if (write_log_) {
    std::string state = counts.log_failed.empty() ? "on" : counts.log_failed;
    if (lost) {
      state = "ended at its last flush or mark: its backend process died";
    }
    report.config.push_back({"log_state", state});
  }
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    report.queues.push_back(transport_->queue(q).stats().Snapshot());
  }
  if (write_log_) {
    // The log is the disk's: its counts go on queue 0's row.
    auto& values = report.queues[0].values;
    values[stats::Index(stats::Counter::log_entries)] = counts.log.entries;
    values[stats::Index(stats::Counter::log_bytes)] = counts.log.bytes;
  }
  if (cache_volatile_) {
    // The cache is the disk's, not a queue's: its counts go on queue 0's
    // row, so that the total row shows them once.
    const io::VolatileCacheCounts& cache = counts.cache;
    auto& values = report.queues[0].values;
    values[stats::Index(stats::Counter::unsafe_bytes)] = cache.unsafe_bytes;
    values[stats::Index(stats::Counter::unsafe_bytes_max)] =
        cache.unsafe_bytes_max;
    values[stats::Index(stats::Counter::flushes)] = cache.flushes;
    values[stats::Index(stats::Counter::full_flushes)] = cache.full_flushes;
    values[stats::Index(stats::Counter::full_waits)] = cache.full_waits;
  }
  return report;
}

bool Disk::lost_with_backend() const {
  return supervisor_ && (cache_volatile_ || write_log_) &&
         supervisor_->state() == "failed";
}

BackendDiskCounts Disk::CacheAndLogCounts() const {
  BackendDiskCounts counts;
  if (!supervisor_) {
    if (cache_) counts.cache = cache_->counts();
    if (write_log_) {
      counts.log = write_log_->counts();
      counts.log_failed = write_log_->failed();
    }
    return counts;
  }
  if (!cache_volatile_ && !write_log_) return counts;
  std::lock_guard<std::mutex> lock(remote_mu_);
  absl::StatusOr<BackendDiskCounts> remote = RemoteCounts(*supervisor_);
  if (remote.ok()) remote_counts_ = *remote;
  return remote_counts_;
}

void Disk::ResetStats() {
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    transport_->queue(q).stats().Reset();
  }
  if (supervisor_ && (cache_volatile_ || write_log_)) {
    std::lock_guard<std::mutex> lock(remote_mu_);
    if (absl::Status reset = RemoteResetCounts(*supervisor_); !reset.ok()) {
      LogInfo("%s", reset.message());
    }
    remote_counts_ = BackendDiskCounts();
    return;
  }
  if (cache_) cache_->ResetCounts();
  if (write_log_) write_log_->ResetCounts();
}

absl::Status Disk::Mark(std::string_view name) {
  if (!write_log_) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, " has no write log to mark: mount it with --disk ",
                     image_->name(), ",log=FILE"));
  }
  if (!supervisor_) return write_log_->AppendMark(name);
  if (lost_with_backend()) {
    return absl::UnavailableError(absl::StrCat(
        name_, "'s write log ended when its backend process died"));
  }
  absl::Status marked = RemoteMark(*supervisor_, name);
  if (marked.ok() || marked.code() == absl::StatusCode::kInvalidArgument) {
    return marked;
  }
  return absl::Status(marked.code(),
                      absl::StrCat(name_, ": ", marked.message()));
}

absl::StatusOr<io::PowerCutResult> Disk::PowerCut(io::PowerKeep keep,
                                                  uint64_t seed) {
  if (!cache_volatile_) {
    return absl::FailedPreconditionError(absl::StrCat(
        name_, " has no volatile cache to lose: mount it with --disk ",
        image_->name(), ",cache=volatile"));
  }
  if (lost_with_backend()) {
    return absl::FailedPreconditionError(absl::StrCat(
        name_, " lost its power already: its backend process died"));
  }
  absl::StatusOr<io::PowerCutResult> cut =
      supervisor_ ? RemotePowerCut(*supervisor_, keep, seed)
                  : cache_->PowerCut(keep, seed);
  if (!cut.ok()) {
    if (!supervisor_) return cut.status();
    return absl::Status(cut.status().code(),
                        absl::StrCat(name_, ": ", cut.status().message()));
  }
  const io::PowerCutResult result = *cut;
  LogInfo(
      "%s lost its power: %u unflushed write(s) of %u bytes dropped, "
      "%u of %u bytes kept",
      name_, result.dropped_writes, result.dropped_bytes, result.kept_writes,
      result.kept_bytes);
  std::lock_guard<std::mutex> lock(cut_mu_);
  cut_result_ = result;
  return result;
}

}  // namespace pvdisk::fuse
