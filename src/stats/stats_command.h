// The commands a user may write into the mount's `stats` file. Kept apart
// from the FUSE handler so that it can be tested and fuzzed without libfuse.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pvdisk::stats {

enum class StatsCommand {
  kReset,     // zero every counter of every queue
  kPowerCut,  // cut the power of a disk with cache=volatile
  kMark,      // add a mark to the write log of a disk with log=FILE
};

// One write's command with its arguments.
struct StatsRequest {
  StatsCommand command = StatsCommand::kReset;
  // kPowerCut: the disk's file name in the mount, which unflushed writes
  // reach the image ("none", "all" or "random"), and the seed of "random".
  std::string disk;
  std::string keep = "none";
  uint64_t seed = 0;
  // kMark: the mark's name; `disk` names the disk, or is empty for every
  // disk of the mount that has a log.
  std::string mark;
};

// Parses the bytes of one write(2) to the stats file:
//   reset
//   powercut DISK [keep=none|all|random] [seed=N]
//   mark [DISK] NAME
// (what `pvdisk powercut` writes), surrounding ASCII whitespace (such as
// echo's newline) allowed. Anything else is InvalidArgument naming what was
// written and what is allowed.
absl::StatusOr<StatsRequest> ParseStatsRequest(absl::string_view text);

// ParseStatsRequest's command alone.
absl::StatusOr<StatsCommand> ParseStatsCommand(absl::string_view text);

}  // namespace pvdisk::stats
