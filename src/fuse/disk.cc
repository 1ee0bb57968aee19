#include "fuse/disk.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/size.h"
#include "base/status_macros.h"

namespace pvdisk::fuse {

absl::StatusOr<std::unique_ptr<Disk>> Disk::Open(const DiskSpec& spec,
                                                 const std::string& name,
                                                 const DiskOptions& options) {
  std::unique_ptr<Disk> disk(new Disk());
  disk->name_ = name;
  disk->options_ = options;
  // The null engine never touches the image, so O_DIRECT does not matter.
  bool want_direct = options.engine != io::EngineKind::kNull;
  PVDISK_ASSIGN_OR_RETURN(
      disk->image_,
      io::ImageFile::Open(spec.path, spec.read_only, want_direct));
  if (spec.expected_size && *spec.expected_size != disk->image_->size_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--disk ", spec.path, ",size=", FormatSize(*spec.expected_size),
        " does not match the image, which has ", disk->image_->size_bytes(),
        " bytes"));
  }

  io::EngineOptions engine_options;
  engine_options.kind = options.engine;
  engine_options.depth = options.ring_size;
  engine_options.fault = spec.fault;
  PVDISK_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> engine,
                          io::CreateEngine(engine_options, *disk->image_));
  disk->engine_mode_ = std::string(engine->mode());

  transport::QueueOptions queue_options;
  queue_options.name = absl::StrCat("pvdisk-", name, "-q0");
  queue_options.ring_size = options.ring_size;
  queue_options.disk_sectors = disk->image_->size_sectors();
  queue_options.read_only = spec.read_only;
  PVDISK_ASSIGN_OR_RETURN(
      std::unique_ptr<transport::Queue> queue,
      transport::Queue::Create(queue_options, std::move(engine)));
  disk->queues_.push_back(std::move(queue));
  return disk;
}

Disk::~Disk() { Shutdown(); }

void Disk::Start() {
  for (auto& queue : queues_) queue->Start();
}

void Disk::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& queue : queues_) queue->Shutdown();
  if (!image_->read_only() && fdatasync(image_->fd()) != 0) {
    LogInfo("fdatasync of %s failed: %s", image_->path(), strerror(errno));
  }
}

stats::DiskReport Disk::Report() const {
  stats::DiskReport report;
  report.name = name_;
  report.config = {
      {"image", image_->path()},
      {"size", absl::StrCat(image_->size_bytes())},
      {"read_only", image_->read_only() ? "yes" : "no"},
      {"frontend", "blkif"},
      {"queues", absl::StrCat(queues_.size())},
      {"ring_size", absl::StrCat(options_.ring_size)},
      {"max_segments", "11"},
      {"notify", "event-idx"},
      {"engine", std::string(io::EngineKindName(options_.engine))},
      {"engine_mode", engine_mode_},
  };
  for (const auto& queue : queues_) {
    report.queues.push_back(queue->stats().Snapshot());
  }
  return report;
}

void Disk::ResetStats() {
  for (auto& queue : queues_) queue->stats().Reset();
}

}  // namespace pvdisk::fuse
