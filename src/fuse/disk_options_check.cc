#include "fuse/disk_options_check.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/size.h"
#include "base/status_macros.h"

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

absl::StatusOr<DiskOptions> DiskOptionsFromFlags(
    const FlagValues& flags, const transport::TransportOptions& transport,
    const std::vector<DiskSpec>& disks) {
  DiskOptions options;
  options.transport = transport;
  PVDISK_ASSIGN_OR_RETURN(bool backend_thread,
                          flags.OneOf("backend", "thread", "process"));
  options.backend =
      backend_thread ? BackendMode::kThread : BackendMode::kProcess;
  PVDISK_ASSIGN_OR_RETURN(uint64_t restart_limit,
                          flags.Number("backend-restart-limit",
                                       transport::process::kDefaultRestartLimit,
                                       0, kMaxBackendRestartLimit));
  options.backend_restart_limit = static_cast<uint32_t>(restart_limit);
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t shutdown_timeout,
      flags.Number("shutdown-timeout", kDefaultShutdownTimeoutSeconds,
                   kMinShutdownTimeoutSeconds, kMaxShutdownTimeoutSeconds));
  options.shutdown_timeout_seconds = static_cast<uint32_t>(shutdown_timeout);
  PVDISK_ASSIGN_OR_RETURN(options.engine,
                          io::ParseEngineKind(flags.Get("engine", "uring")));
  DiskOptionFlags given;
  given.irq = flags.Has("irq");
  given.backend_restart_limit = flags.Has("backend-restart-limit");
  PVDISK_RETURN_IF_ERROR(CheckDiskOptions(options, given, disks));
  return options;
}

bool PayloadsInPlace(const DiskOptions& options) {
  return options.transport.queue.persistent &&
         options.backend == BackendMode::kThread;
}

absl::Status CheckDiskSpec(const DiskSpec& spec, uint64_t size_bytes) {
  if (spec.expected_size && *spec.expected_size != size_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--disk ", spec.arg, ": the image has ", size_bytes,
                     " bytes, not ", FormatSize(*spec.expected_size)));
  }
  if (spec.fault) {
    const uint64_t sectors = size_bytes / 512;
    if (spec.fault->first_sector >= sectors ||
        spec.fault->sector_count > sectors - spec.fault->first_sector) {
      return absl::InvalidArgumentError(
          absl::StrCat("--disk ", spec.arg, ": the eio range ",
                       spec.fault->first_sector, "+", spec.fault->sector_count,
                       " does not fit in the image's ", sectors, " sectors"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::fuse
