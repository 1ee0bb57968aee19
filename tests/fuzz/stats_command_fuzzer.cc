// Fuzzes ParseStatsCommand: any bytes written to the stats file are either
// the one command (and then "reset" is what they say) or refused with an
// InvalidArgument naming the allowed command.
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "fuzz_input.h"
#include "stats/stats_command.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pvdisk::stats::StatsCommand> command =
      pvdisk::stats::ParseStatsCommand(text);
  if (command.ok()) {
    FUZZ_CHECK(absl::StrContains(text, "reset"),
               "a command accepted that does not say reset");
    FUZZ_CHECK(size < 4096, "an absurdly long write accepted");
  } else {
    FUZZ_CHECK(command.status().code() == absl::StatusCode::kInvalidArgument,
               "refused with a code other than InvalidArgument");
    FUZZ_CHECK(absl::StrContains(command.status().message(), "allowed: reset"),
               "the refusal does not name the allowed command");
    FUZZ_CHECK(command.status().message().size() < 512,
               "the refusal quotes the whole write");
  }
  return 0;
}
