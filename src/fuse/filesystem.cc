#include "fuse/filesystem.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "fuse/attributes.h"
#include "fuse/channel/server.h"
#include "fuse/fuse_ops.h"
#include "fuse/inline_driver.h"
#include "stats/clock.h"
#include "stats/render_metrics.h"

namespace pvdisk::fuse {
Filesystem::Filesystem(std::vector<std::unique_ptr<Disk>> disks,
                       bool allow_other, const FuseChannelOptions& channel)
    : disks_(std::move(disks)),
      allow_other_(allow_other),
      channel_(channel),
      stats_since_ns_(stats::MonotonicNanos()),
      trace_control_([this](std::string_view name) {
        for (auto& disk : disks_) {
          if (disk->name() == name) return disk->QueueTraces();
        }
        return std::vector<trace::QueueTrace*>{};
      }) {
  for (auto& disk : disks_)
    disk_ios_.push_back(std::make_unique<DiskIo>(disk.get()));
}

Filesystem::~Filesystem() {
  for (auto& disk : disks_) disk->Shutdown();
}

bool Filesystem::abandoned_io() const {
  for (const auto& disk : disks_) {
    if (disk->abandoned()) return true;
  }
  return false;
}

std::vector<stats::DiskReport> Filesystem::Reports() const {
  std::vector<stats::DiskReport> reports;
  for (const auto& disk : disks_) reports.push_back(disk->Report());
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
  for (auto& disk : disks_) {
    if (disk->name() != request.disk) continue;
    const io::PowerKeep keep = request.keep == "all" ? io::PowerKeep::kAll
                               : request.keep == "random"
                                   ? io::PowerKeep::kRandom
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
  return -ENOENT;
}

int Filesystem::Mark(const stats::StatsRequest& request) {
  bool found = false;
  for (auto& disk : disks_) {
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
  for (auto& disk : disks_) disk->ResetStats();
  stats_since_ns_.store(stats::MonotonicNanos(), std::memory_order_relaxed);
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
  if (!disks_.empty() && disks_[0]->transport_options().placement ==
                             transport::Placement::kInline) {
    std::vector<Disk*> disks;
    for (auto& disk : disks_) disks.push_back(disk.get());
    serve.companions.sq_entries = InlineSubmissionEntries(disks);
    serve.companions.make = [disks](uint32_t qid) {
      return std::make_unique<InlineDriver>(disks, qid);
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
    if (disks_.empty()) return;
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::seconds(disks_[0]->shutdown_timeout_seconds());
    for (auto& disk : disks_) disk->Shutdown(deadline);
  };
  return channel::Serve(serve, &handler, hooks);
}

}  // namespace pvdisk::fuse
