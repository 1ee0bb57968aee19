#include "fuse/disk_options_check.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pvdisk::fuse {

absl::Status CheckDiskOptions(const DiskOptions& options,
                              const DiskOptionFlags& given,
                              const std::vector<DiskSpec>& disks) {
  const bool in_process = options.backend == BackendMode::kProcess;
  if (in_process && given.irq &&
      options.transport.queue.irq == transport::InterruptMode::kInline) {
    return absl::InvalidArgumentError(
        "--irq inline runs the frontend's interrupt handler on the backend "
        "thread, which --backend process puts in another process: use --irq "
        "thread (the default with --backend process)");
  }
  if (given.backend_restart_limit && !in_process) {
    return absl::InvalidArgumentError(
        "--backend-restart-limit applies to --backend process only");
  }
  for (const DiskSpec& disk : disks) {
    if (disk.rbd && options.engine != io::EngineKind::kUring) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--engine ", std::string(io::EngineKindName(options.engine)),
          " applies to image files; ", disk.rbd->Name(),
          " is always served by the rbd engine (leave --engine out, or "
          "serve it in a mount of its own)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::fuse
