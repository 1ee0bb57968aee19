#include "cli/disk_arg.h"

#include <optional>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/size.h"

namespace pvdisk::cli {
namespace {

// The microseconds of delay=US or delay-write=US: digits only, 0 to
// io::kMaxDelayUs.
absl::StatusOr<uint32_t> ParseDelayUs(absl::string_view disk_text,
                                      absl::string_view key,
                                      absl::string_view value) {
  uint32_t us = 0;
  if (value.empty() || !absl::c_all_of(value, absl::ascii_isdigit) ||
      !absl::SimpleAtoi(value, &us) || us > io::kMaxDelayUs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--disk ", disk_text, ": ", key, " takes microseconds from 0 to ",
        io::kMaxDelayUs, " (a device latency model), e.g. ", key, "=2000"));
  }
  return us;
}

}  // namespace

absl::StatusOr<fuse::DiskSpec> ParseDiskArg(absl::string_view text) {
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(text.data(), text.size()), ',');
  fuse::DiskSpec spec;
  spec.path = parts[0];
  std::optional<uint32_t> delay_us;
  std::optional<uint32_t> delay_write_us;
  if (spec.path.empty()) {
    return absl::InvalidArgumentError(
        "--disk needs an image path: --disk PATH[,ro][,lock=off][,size=SIZE]"
        "[,eio=SECTOR[+COUNT]]");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& option = parts[i];
    if (option == "ro") {
      spec.read_only = true;
    } else if (option == "lock=off" || option == "lock=on") {
      spec.lock = option == "lock=on";
    } else if (option.rfind("size=", 0) == 0) {
      absl::StatusOr<uint64_t> size = ParseSize(option.substr(5));
      if (!size.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", text, ": ", size.status().message()));
      }
      spec.expected_size = *size;
    } else if (option.rfind("eio=", 0) == 0) {
      std::vector<std::string> range = absl::StrSplit(option.substr(4), '+');
      io::FaultRange fault;
      if (range.size() > 2 ||
          !absl::SimpleAtoi(range[0], &fault.first_sector) ||
          (range.size() == 2 &&
           (!absl::SimpleAtoi(range[1], &fault.sector_count) ||
            fault.sector_count == 0))) {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", text,
                         ": eio takes SECTOR or SECTOR+COUNT (512-byte "
                         "sectors), e.g. eio=2048+8"));
      }
      spec.fault = fault;
    } else if (option.rfind("engine_fail=", 0) == 0) {
      uint64_t submissions = 0;
      if (!absl::SimpleAtoi(option.substr(12), &submissions) ||
          submissions == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--disk ", text,
            ": engine_fail takes a count of submissions from 1 (test only: "
            "the engine fails as a whole at that submission), e.g. "
            "engine_fail=100"));
      }
      spec.engine_fail = submissions;
    } else if (option.rfind("delay=", 0) == 0) {
      absl::StatusOr<uint32_t> us =
          ParseDelayUs(text, "delay", absl::string_view(option).substr(6));
      if (!us.ok()) return us.status();
      delay_us = *us;
    } else if (option.rfind("delay-write=", 0) == 0) {
      absl::StatusOr<uint32_t> us = ParseDelayUs(
          text, "delay-write", absl::string_view(option).substr(12));
      if (!us.ok()) return us.status();
      delay_write_us = *us;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--disk ", text, ": unknown option '", option,
                       "'; allowed: ro, lock=on|off, size=SIZE, "
                       "eio=SECTOR[+COUNT], delay=US, delay-write=US, "
                       "engine_fail=N (test only)"));
    }
  }
  // delay= applies to every request, delay-write= overrides it for writes.
  if (delay_us || delay_write_us) {
    io::CompletionDelay delay;
    delay.us = delay_us.value_or(0);
    delay.write_us = delay_write_us.value_or(delay.us);
    spec.delay = delay;
  }
  return spec;
}

}  // namespace pvdisk::cli
