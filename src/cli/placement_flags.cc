#include "cli/placement_flags.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/size.h"
#include "base/status_macros.h"
#include "transport/memory_budget.h"

namespace pvdisk::cli {

absl::Status ReadPlacementFlags(const FlagValues& flags,
                                PlacementInput* input) {
  PVDISK_ASSIGN_OR_RETURN(input->wanted,
                          ParsePlacement(flags.Get("placement", "auto")));
  input->memory_budget = transport::DefaultMemoryBudget();
  if (flags.Has("max-memory")) {
    absl::StatusOr<uint64_t> size = ParseSize(flags.Get("max-memory", ""));
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-memory: ", std::string(size.status().message())));
    }
    input->memory_budget = *size;
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::cli
