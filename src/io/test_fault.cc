#include "io/test_fault.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pvdisk::io {
namespace {

absl::Status NotAllowed(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      kTestFaultVariable, "='", absl::string_view(text.data(), text.size()),
      "' is not allowed: ", absl::string_view(why.data(), why.size()),
      "; use hang=SECTOR, fail=N (N from 1), fanout and/or lying-flush, "
      "separated by "
      "commas (test only)"));
}

}  // namespace

absl::StatusOr<TestFault> ParseTestFault(std::string_view text) {
  TestFault fault;
  for (absl::string_view item :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    uint64_t number = 0;
    if (absl::ConsumePrefix(&item, "hang=")) {
      if (fault.hang_sector || !absl::SimpleAtoi(item, &number)) {
        return NotAllowed(text, "hang takes one sector number");
      }
      fault.hang_sector = number;
    } else if (absl::ConsumePrefix(&item, "fail=")) {
      if (fault.fail_at || !absl::SimpleAtoi(item, &number) || number == 0) {
        return NotAllowed(text, "fail takes one count of submissions from 1");
      }
      fault.fail_at = number;
    } else if (item == "fanout") {
      if (fault.fanout) return NotAllowed(text, "fanout is given twice");
      fault.fanout = true;
    } else if (item == "lying-flush") {
      if (fault.lying_flush) {
        return NotAllowed(text, "lying-flush is given twice");
      }
      fault.lying_flush = true;
    } else {
      return NotAllowed(text, absl::StrCat("unknown fault '", item, "'"));
    }
  }
  return fault;
}

absl::StatusOr<TestFault> TestFaultFromEnvironment() {
  const char* value = std::getenv(kTestFaultVariable);
  if (value == nullptr) return TestFault{};
  return ParseTestFault(value);
}

std::shared_ptr<EngineFailTrigger> ProcessFailTrigger(uint64_t fail_at) {
  static const std::shared_ptr<EngineFailTrigger> trigger =
      std::make_shared<EngineFailTrigger>(fail_at);
  return trigger;
}

}  // namespace pvdisk::io
