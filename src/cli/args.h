// A small command-line parser for pvdisk's subcommands. Each subcommand
// declares its flags; anything else is refused with one line naming the flag
// and the allowed ones. (absl::flags is process-global and has no repeated
// flags such as --disk A --disk B, nor per-subcommand help.)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/flag_values.h"

namespace pvdisk::cli {

struct FlagSpec {
  std::string name;          // without "--"
  bool takes_value = true;   // false: a switch such as --force
  bool repeatable = false;   // may be given more than once
  std::string value_name;    // for help, e.g. "N"
  std::string default_text;  // for help; empty if none
  std::string help;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // by flag name

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  // The last value of a flag, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback) const;
  // The flags given, each with its last value, for the libraries that read
  // and check their own (base/flag_values.h).
  FlagValues Flags() const;
};

// Parses `args` (the words after the subcommand). Accepts "--name value" and
// "--name=value". `command` names the subcommand in messages.
absl::StatusOr<ParsedArgs> ParseArgs(absl::string_view command,
                                     const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args);

// The help text listing `specs` with defaults.
std::string FlagHelp(const std::vector<FlagSpec>& specs);

// Parses a whole number in [min, max]; the message names the flag and range.
absl::StatusOr<uint64_t> ParseNumber(absl::string_view flag,
                                     absl::string_view text, uint64_t min,
                                     uint64_t max);

}  // namespace pvdisk::cli
