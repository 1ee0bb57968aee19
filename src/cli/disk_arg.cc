#include "cli/disk_arg.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/size.h"

namespace pvdisk::cli {

absl::StatusOr<fuse::DiskSpec> ParseDiskArg(absl::string_view text) {
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(text.data(), text.size()), ',');
  fuse::DiskSpec spec;
  spec.arg = std::string(text);
  spec.path = parts[0];
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
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--disk ", text, ": unknown option '", option,
                       "'; allowed: ro, lock=on|off, size=SIZE, "
                       "eio=SECTOR[+COUNT], engine_fail=N (test only)"));
    }
  }
  return spec;
}

}  // namespace pvdisk::cli
