// Fuzzes ParseSize (SIZE in --disk ...,size=SIZE and `pvdisk create`): any
// text either parses to a positive byte count that survives a round trip
// through its decimal form and through FormatSize, or is refused with an
// InvalidArgument that quotes it.
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/size.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<uint64_t> bytes = pvdisk::ParseSize(text);
  if (!bytes.ok()) {
    FUZZ_CHECK(bytes.status().code() == absl::StatusCode::kInvalidArgument,
               "refused with a code other than InvalidArgument");
    FUZZ_CHECK(absl::StrContains(bytes.status().message(), "does not parse"),
               "the refusal does not say what is wrong");
    return 0;
  }
  FUZZ_CHECK(*bytes > 0, "a zero size accepted");
  absl::StatusOr<uint64_t> decimal = pvdisk::ParseSize(absl::StrCat(*bytes));
  FUZZ_CHECK(decimal.ok() && *decimal == *bytes,
             "the decimal form does not parse back to the same size");
  // FormatSize writes "1 GiB"; without the space it is ParseSize's form.
  std::string formatted =
      absl::StrReplaceAll(pvdisk::FormatSize(*bytes), {{" ", ""}});
  absl::StatusOr<uint64_t> again = pvdisk::ParseSize(formatted);
  FUZZ_CHECK(again.ok() && *again == *bytes,
             "FormatSize's text does not parse back to the same size");
  return 0;
}
