// What pvdisk mount's own flags say about the placement (--placement,
// --max-memory), read and checked for cli::DecidePlacement (placement.h),
// which decides it.
#pragma once

#include "absl/status/status.h"
#include "base/flag_values.h"
#include "cli/placement.h"

namespace pvdisk::cli {

// Fills `input->wanted` and `input->memory_budget` (a quarter of RAM, or
// --max-memory's size). Refuses an unknown placement or size.
absl::Status ReadPlacementFlags(const FlagValues& flags, PlacementInput* input);

}  // namespace pvdisk::cli
