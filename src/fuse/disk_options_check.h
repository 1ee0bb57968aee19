// The checks of DiskOptions (fuse/disk.h), as their flags set them, against
// each other and against the disks they serve: pure, so that they are
// tested without a mount.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/flag_values.h"
#include "fuse/disk.h"

namespace pvdisk::fuse {

// Which of the flags behind DiskOptions the command line gave: giving one
// asks for what it sets, whatever its value.
struct DiskOptionFlags {
  bool irq = false;                    // --irq
  bool backend_restart_limit = false;  // --backend-restart-limit
};

// Refuses, in one line naming the flag and what is allowed: --irq inline
// given with --backend process (the interrupt handler would run in the
// other process), --backend-restart-limit with backend threads (nothing
// restarts), and --engine other than uring (the default) with an rbd: disk,
// which the rbd engine always serves.
absl::Status CheckDiskOptions(const DiskOptions& options,
                              const DiskOptionFlags& given,
                              const std::vector<DiskSpec>& disks);

// The disk options as `flags` set them (--engine, --backend,
// --backend-restart-limit, --shutdown-timeout, each against its words or
// range), over `transport` (the transport's flags, already read), checked
// by CheckDiskOptions against each other and `disks`.
absl::StatusOr<DiskOptions> DiskOptionsFromFlags(
    const FlagValues& flags, const transport::TransportOptions& transport,
    const std::vector<DiskSpec>& disks);

// Whether the disks' rings can read into and write from the FUSE uring
// payloads themselves (the payload arena granted to their backends, no
// copy): with persistent grants and the backend in this process.
bool PayloadsInPlace(const DiskOptions& options);

// Whether `spec` fits its image of `size_bytes`: the size it expects
// (size=) and its eio= range. Refuses, naming the --disk argument
// (spec.arg), what the image has and what was asked.
absl::Status CheckDiskSpec(const DiskSpec& spec, uint64_t size_bytes);

}  // namespace pvdisk::fuse
