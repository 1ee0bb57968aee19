#include "stats/stats_command.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pvdisk::stats {
namespace {

absl::Status Unknown(absl::string_view command, absl::string_view why) {
  // Quote at most a line's worth of what was written, escaped, so that
  // binary junk stays printable.
  constexpr size_t kQuoted = 64;
  return absl::InvalidArgumentError(absl::StrCat(
      "stats: ", why, " '", absl::CEscape(command.substr(0, kQuoted)),
      command.size() > kQuoted ? "...'" : "'",
      "; allowed: reset, powercut DISK [keep=none|all|random] [seed=N], "
      "mark [DISK] NAME"));
}

}  // namespace

absl::StatusOr<StatsRequest> ParseStatsRequest(absl::string_view text) {
  absl::string_view command = absl::StripAsciiWhitespace(text);
  StatsRequest request;
  if (command == "reset") return request;
  std::vector<absl::string_view> words =
      absl::StrSplit(command, ' ', absl::SkipEmpty());
  if (!words.empty() && words[0] == "mark") {
    if (words.size() < 2 || words.size() > 3 ||
        (words.size() == 3 && absl::StrContains(words[1], '/'))) {
      return Unknown(command, "mark takes a name, after a disk's if given, in");
    }
    request.command = StatsCommand::kMark;
    if (words.size() == 3) request.disk = std::string(words[1]);
    request.mark = std::string(words.back());
    return request;
  }
  if (words.empty() || words[0] != "powercut") {
    return Unknown(command, "unknown command");
  }
  if (words.size() < 2 || absl::StrContains(words[1], '=') ||
      absl::StrContains(words[1], '/')) {
    return Unknown(command, "powercut needs a disk's name in");
  }
  request.command = StatsCommand::kPowerCut;
  request.disk = std::string(words[1]);
  bool keep_given = false;
  bool seed_given = false;
  for (size_t i = 2; i < words.size(); ++i) {
    absl::string_view word = words[i];
    if (absl::ConsumePrefix(&word, "keep=") && !keep_given &&
        (word == "none" || word == "all" || word == "random")) {
      request.keep = std::string(word);
      keep_given = true;
    } else if (absl::ConsumePrefix(&word, "seed=") && !seed_given &&
               absl::SimpleAtoi(word, &request.seed)) {
      seed_given = true;
    } else {
      return Unknown(command, "powercut takes keep= and seed= once each, not");
    }
  }
  return request;
}

absl::StatusOr<StatsCommand> ParseStatsCommand(absl::string_view text) {
  absl::StatusOr<StatsRequest> request = ParseStatsRequest(text);
  if (!request.ok()) return request.status();
  return request->command;
}

}  // namespace pvdisk::stats
