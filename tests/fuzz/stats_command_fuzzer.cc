// Fuzzes ParseStatsRequest: any bytes written to the stats file are either
// one of its commands (and then they say "reset", "mark" and a name, or
// "powercut" and a disk name) or refused with an InvalidArgument naming the
// allowed commands.
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "fuzz_input.h"
#include "stats/stats_command.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pvdisk::stats::StatsRequest> command =
      pvdisk::stats::ParseStatsRequest(text);
  if (command.ok()) {
    if (command->command == pvdisk::stats::StatsCommand::kReset) {
      FUZZ_CHECK(absl::StrContains(text, "reset"),
                 "a reset accepted that does not say reset");
    } else if (command->command == pvdisk::stats::StatsCommand::kMark) {
      FUZZ_CHECK(absl::StrContains(text, "mark"),
                 "a mark accepted that does not say mark");
      FUZZ_CHECK(
          !command->mark.empty() && absl::StrContains(text, command->mark),
          "a mark whose name the write does not give");
    } else {
      FUZZ_CHECK(absl::StrContains(text, "powercut"),
                 "a power cut accepted that does not say powercut");
      FUZZ_CHECK(
          !command->disk.empty() && absl::StrContains(text, command->disk),
          "a power cut of a disk the write does not name");
      FUZZ_CHECK(command->keep == "none" || command->keep == "all" ||
                     command->keep == "random",
                 "a power cut with a keep outside none, all, random");
    }
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
