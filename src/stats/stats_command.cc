#include "stats/stats_command.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pvdisk::stats {

absl::StatusOr<StatsCommand> ParseStatsCommand(absl::string_view text) {
  absl::string_view command = absl::StripAsciiWhitespace(text);
  if (command == "reset") return StatsCommand::kReset;
  // Quote at most a line's worth of what was written, escaped, so that
  // binary junk stays printable.
  constexpr size_t kQuoted = 64;
  return absl::InvalidArgumentError(absl::StrCat(
      "stats: unknown command '", absl::CEscape(command.substr(0, kQuoted)),
      command.size() > kQuoted ? "...'" : "'", "; allowed: reset"));
}

}  // namespace pvdisk::stats
