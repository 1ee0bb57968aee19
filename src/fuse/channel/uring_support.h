// Whether this kernel offers FUSE-over-io_uring, and the --fuse-io choice.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pvdisk::fuse::channel {

// The kernel's num_possible_cpus(): how many FUSE uring queues there are
// (one per possible CPU), all of which must be registered.
uint32_t PossibleCpus();

// pvdisk mount's --fuse-io.
enum class FuseIo { kAuto, kUring, kClassic };

absl::StatusOr<FuseIo> ParseFuseIo(std::string_view text);
std::string_view FuseIoName(FuseIo io);

inline constexpr const char* kEnableUringParameter =
    "/sys/module/fuse/parameters/enable_uring";

struct UringSupport {
  bool available = false;
  // We switched the module parameter on (root only).
  bool turned_on = false;
  // When not available: why, for the user.
  std::string why_not;
};

// Looks at the fuse module's enable_uring parameter (`parameter`, the real
// one unless a test passes another file). A kernel without it (no
// CONFIG_FUSE_IO_URING, or older than 6.14) cannot. When it is off and
// `may_turn_on` and we are root, turns it on.
UringSupport CheckUringSupport(
    bool may_turn_on, const std::string& parameter = kEnableUringParameter);

// Resolves --fuse-io to kUring or kClassic (turning enable_uring on if it
// may). `uring` on a kernel that cannot: an InvalidArgument error saying
// why. `note` gets a line for the mount message, or stays empty.
absl::StatusOr<FuseIo> ResolveFuseIo(
    FuseIo wanted, std::string* note,
    const std::string& parameter = kEnableUringParameter);

}  // namespace pvdisk::fuse::channel
