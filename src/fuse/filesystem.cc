#include "fuse/filesystem.h"

#include <unistd.h>

#include <cerrno>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "fuse/attributes.h"
#include "fuse/channel/server.h"
#include "fuse/fuse_ops.h"
#include "fuse/inline_driver.h"
#include "stats/clock.h"
#include "stats/render_metrics.h"

namespace pvdisk::fuse {
namespace {

// Every disk can be detached: one of the inline placement is let go by the
// FUSE queue threads that drive it (InlineDrivers::Drop).
std::string CanDetach(const Disk&) { return ""; }

}  // namespace

Filesystem::Filesystem(std::vector<std::unique_ptr<Disk>> disks,
                       bool allow_other, const FuseChannelOptions& channel,
                       DiskOpener open_disk)
    : disks_(std::move(disks)),
      open_disk_(std::move(open_disk)),
      allow_other_(allow_other),
      channel_(channel),
      stats_since_ns_(stats::MonotonicNanos()),
      trace_control_([this](std::string_view name) {
        // The traces of a disk detached later stay valid: TraceControl
        // turns them off first (Filesystem::Detach).
        DiskRef disk = disks_.EnterByName(name);
        if (!disk) return std::vector<trace::QueueTrace*>{};
        return disk.disk().QueueTraces();
      }) {}

Filesystem::~Filesystem() {
  StopControl();
  disks_.ForEachDisk([](Disk& disk) { disk.Shutdown(); });
}

bool Filesystem::abandoned_io() const {
  if (detached_abandoned_.load(std::memory_order_acquire)) return true;
  for (const DiskRef& disk : disks_.EnterAll()) {
    if (disk.disk().abandoned()) return true;
  }
  return false;
}

std::vector<stats::DiskReport> Filesystem::Reports() const {
  std::vector<stats::DiskReport> reports;
  for (const DiskRef& disk : disks_.EnterAll()) {
    reports.push_back(disk.disk().Report());
  }
  return reports;
}

std::string Filesystem::StatsText() const {
  return stats::RenderText(Reports());
}

std::string Filesystem::MetricsText() const {
  return stats::RenderMetrics(Reports());
}

std::string Filesystem::StatsJson() const {
  std::vector<stats::DiskReport> reports = Reports();
  stats::ReportClock clock;
  clock.now_ns = stats::MonotonicNanos();
  clock.since_ns = stats_since_ns_.load(std::memory_order_relaxed);
  clock.daemon_pid = getpid();
  return stats::RenderJson(reports, clock);
}

int Filesystem::PowerCut(const stats::StatsRequest& request) {
  DiskRef ref = disks_.EnterByName(request.disk);
  if (!ref) return -ENOENT;
  Disk* disk = &ref.disk();
  const io::PowerKeep keep = request.keep == "all"      ? io::PowerKeep::kAll
                             : request.keep == "random" ? io::PowerKeep::kRandom
                                                        : io::PowerKeep::kNone;
  absl::StatusOr<io::PowerCutResult> cut = disk->PowerCut(keep, request.seed);
  if (cut.ok()) return 0;
  LogInfo("%s", cut.status().message());
  switch (cut.status().code()) {
    case absl::StatusCode::kFailedPrecondition:
      return disk->has_volatile_cache() ? -EALREADY : -EINVAL;
    default:
      return -EIO;
  }
}

int Filesystem::Mark(const stats::StatsRequest& request) {
  bool found = false;
  for (const DiskRef& ref : disks_.EnterAll()) {
    Disk* disk = &ref.disk();
    if (request.disk.empty() ? !disk->has_write_log()
                             : disk->name() != request.disk) {
      continue;
    }
    found = true;
    if (absl::Status marked = disk->Mark(request.mark); !marked.ok()) {
      LogInfo("%s", marked.message());
      const bool bad_input =
          !disk->has_write_log() ||
          marked.code() == absl::StatusCode::kInvalidArgument;
      return bad_input ? -EINVAL : -EIO;
    }
  }
  if (found) return 0;
  return request.disk.empty() ? -EINVAL : -ENOENT;
}

void Filesystem::ResetStats() {
  for (const DiskRef& disk : disks_.EnterAll()) disk.disk().ResetStats();
  stats_since_ns_.store(stats::MonotonicNanos(), std::memory_order_relaxed);
}

absl::Status Filesystem::Attach(const std::vector<std::string>& words) {
  if (!open_disk_) {
    return absl::FailedPreconditionError("this mount cannot attach disks");
  }
  std::unique_ptr<Disk> disk;
  {
    std::vector<DiskRef> refs = disks_.EnterAll();
    std::vector<const Disk*> attached;
    for (const DiskRef& ref : refs) attached.push_back(&ref.disk());
    absl::StatusOr<std::unique_ptr<Disk>> opened = open_disk_(words, attached);
    if (!opened.ok()) return opened.status();
    disk = std::move(*opened);
  }
  disk->Start();
  const std::string name = disk->name();
  Disk* added_disk = disk.get();
  if (absl::Status added = disks_.Add(std::move(disk)); !added.ok()) {
    return added;  // the disk was shut down and freed by the failed Add
  }
  // Attaches and detaches run one at a time (the control worker): the
  // disk is still there.
  added_disk->Serving();
  LogInfo("attached disk %s", name.c_str());
  return absl::OkStatus();
}

absl::Status Filesystem::Detach(const std::string& name, bool force) {
  absl::StatusOr<DetachedDisk> detached = disks_.Remove(name, force, CanDetach);
  if (!detached.ok()) return detached.status();
  // Its traces stop before the disk goes (a trace reader may hold them).
  trace_control_.Forget(detached->disk->QueueTraces());
  detached->disk->Shutdown();
  const bool abandoned = detached->disk->abandoned();
  if (abandoned) {
    // Disk::Shutdown's contract: what it abandoned is never freed, and the
    // process ends without unmapping what its engines may still write
    // into.
    detached_abandoned_.store(true, std::memory_order_release);
    (void)detached->disk.release();
    (void)detached->io.release();
    return absl::DataLossError(
        absl::StrCat("disk ", name,
                     " did not finish its I/O within --shutdown-timeout; "
                     "what was in flight failed with EIO"));
  }
  // The FUSE queue threads that drive an inline disk let it go, and with it
  // their rings' references to its image files: only then is the image
  // really closed (and its lock free).
  if (detached->disk->transport_options().placement ==
      transport::Placement::kInline) {
    inline_drivers_.Drop(detached->disk.get());
  }
  detached->disk.reset();
  detached->io.reset();
  LogInfo("detached disk %s", name.c_str());
  return absl::OkStatus();
}

void Filesystem::RunControl(ControlRequest request,
                            std::function<void(absl::Status)> done) {
  ControlWorker* worker;
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (!control_) control_ = std::make_unique<ControlWorker>();
    worker = control_.get();
  }
  worker->Post([this, request = std::move(request), done = std::move(done)] {
    done(request.command == ControlRequest::Command::kAttach
             ? Attach(request.words)
             : Detach(request.disk, request.force));
  });
}

void Filesystem::StopControl() {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (control_) control_->Stop();
}

absl::Status Filesystem::MountAndServe(
    const std::string& mountpoint, const std::function<void()>& on_mounted) {
  std::string options = FuseMountOptions(getpid(), allow_other_);
  channel::ServeOptions serve;
  serve.mountpoint = mountpoint;
  serve.mount_options = options;
  serve.channel = channel_;
  // The inline placement: each uring queue's thread drives its queue of
  // every disk (all disks of a mount share the placement).
  // A detach of one of these disks has the drivers let it go first
  // (InlineDrivers::Drop).
  std::vector<Disk*> disks;
  for (const DiskRef& disk : disks_.EnterAll()) disks.push_back(&disk.disk());
  if (!disks.empty() && disks[0]->transport_options().placement ==
                            transport::Placement::kInline) {
    serve.companions.sq_entries = InlineSubmissionEntries(disks);
    serve.companions.make = [this, disks](uint32_t qid) {
      return std::make_unique<InlineDriver>(disks, qid, &inline_drivers_);
    };
  }
  FilesystemHandler handler(this);
  channel::ServeHooks hooks;
  hooks.on_mounted = on_mounted;
  // The channel has stopped taking requests: finish everything in flight
  // and make it durable; the channel then closes and the mount goes.
  // One deadline for all disks: --shutdown-timeout bounds the whole
  // shutdown, not each disk's.
  hooks.drain = [this] {
    // An attach or detach under way finishes first.
    StopControl();
    std::optional<std::chrono::steady_clock::time_point> deadline;
    disks_.ForEachDisk([&](Disk& disk) {
      if (!deadline) {
        deadline = std::chrono::steady_clock::now() +
                   std::chrono::seconds(disk.shutdown_timeout_seconds());
      }
      disk.Shutdown(*deadline);
    });
  };
  return channel::Serve(serve, &handler, hooks);
}

}  // namespace pvdisk::fuse
