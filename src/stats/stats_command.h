// The commands a user may write into the mount's `stats` file. Kept apart
// from the FUSE handler so that it can be tested and fuzzed without libfuse.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pvdisk::stats {

enum class StatsCommand {
  kReset,  // zero every counter of every queue
};

// Parses the bytes of one write(2) to the stats file: "reset", surrounding
// ASCII whitespace (such as echo's newline) allowed. Anything else is
// InvalidArgument naming what was written and what is allowed.
absl::StatusOr<StatsCommand> ParseStatsCommand(absl::string_view text);

}  // namespace pvdisk::stats
