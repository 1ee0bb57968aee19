// Fuzzes the command-line parser (ParseArgs, ParseNumber) with the flags of
// `pvdisk mount`'s kinds: a repeatable flag with a value, a single flag with
// a value, and a switch. The input is the words, separated by NUL bytes.
// Parsed results hold only declared flags, a single flag at most once, and
// no value for a switch; ParseNumber accepts only numbers in range.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli/args.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pvdisk::cli::FlagSpec;
  static const std::vector<FlagSpec> kSpecs = {
      {"disk", true, true, "PATH", "", "an image"},
      {"queues", true, false, "N", "1", "queues per disk"},
      {"allow-other", false, false, "", "", "a switch"},
  };
  std::vector<std::string> words = absl::StrSplit(
      absl::string_view(reinterpret_cast<const char*>(data), size), '\0');
  absl::StatusOr<pvdisk::cli::ParsedArgs> parsed =
      pvdisk::cli::ParseArgs("mount", kSpecs, words);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument,
               "refused with a code other than InvalidArgument");
    FUZZ_CHECK(!parsed.status().message().empty(), "a refusal without reason");
    return 0;
  }
  size_t values = 0;
  for (const auto& [name, list] : parsed->values) {
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : kSpecs) {
      if (s.name == name) spec = &s;
    }
    FUZZ_CHECK(spec != nullptr, "an undeclared flag accepted");
    FUZZ_CHECK(spec->repeatable || list.size() == 1,
               "a single flag given twice accepted");
    if (!spec->takes_value) {
      for (const std::string& value : list) {
        FUZZ_CHECK(value.empty(), "a switch with a value accepted");
      }
    }
    values += list.size();
  }
  FUZZ_CHECK(values + parsed->positional.size() <= words.size(),
             "more values than words");

  // Every word as a number for a flag in [2, 1000].
  for (const std::string& word : words) {
    absl::StatusOr<uint64_t> number =
        pvdisk::cli::ParseNumber("queues", word, 2, 1000);
    FUZZ_CHECK(!number.ok() || (*number >= 2 && *number <= 1000),
               "a number out of range accepted");
  }
  return 0;
}
