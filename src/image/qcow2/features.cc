#include "image/qcow2/features.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pvdisk::image::qcow2 {

const char* IncompatibleFeatureName(int bit) {
  switch (bit) {
    case 0:
      return "dirty";
    case 1:
      return "corrupt";
    case 2:
      return "external data file";
    case 3:
      return "compression type";
    case 4:
      return "extended L2";
    default:
      return "unknown";
  }
}

const char* CompatibleFeatureName(int bit) {
  return bit == 0 ? "lazy refcounts" : "unknown";
}

const char* AutoclearFeatureName(int bit) {
  switch (bit) {
    case 0:
      return "bitmaps";
    case 1:
      return "raw external data";
    default:
      return "unknown";
  }
}

absl::Status CheckIncompatibleFeatures(uint64_t incompatible, bool writable,
                                       const std::string& image) {
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t mask = 1ull << bit;
    if ((incompatible & mask) == 0) continue;
    if (mask == kIncompatDirty && writable) {
      return absl::FailedPreconditionError(absl::StrCat(
          image,
          ": qcow2 incompatible feature bit 0 (dirty) is set: its refcounts "
          "may be stale; repair them with 'qemu-img check -r all' before "
          "writing"));
    }
    if ((kIncompatAccepted & mask) != 0) continue;
    const char* why = "pvdisk does not support it";
    if (mask == kIncompatCorrupt) why = "the metadata is marked inconsistent";
    if (mask == kIncompatExternalData)
      why = "data in an external file is not supported";
    return absl::InvalidArgumentError(
        absl::StrCat(image, ": qcow2 incompatible feature bit ", bit, " (",
                     IncompatibleFeatureName(bit), ") is set: ", why));
  }
  return absl::OkStatus();
}

std::string DescribeFeatures(uint64_t incompatible, uint64_t compatible,
                             uint64_t autoclear) {
  std::vector<std::string> names;
  auto add = [&names](uint64_t bits, const char* (*name)(int),
                      const char* field) {
    for (int bit = 0; bit < 64; ++bit) {
      if ((bits >> bit) & 1) {
        std::string n = name(bit);
        if (n == "unknown") n = absl::StrCat(field, " bit ", bit);
        names.push_back(n);
      }
    }
  };
  add(incompatible, IncompatibleFeatureName, "incompatible");
  add(compatible, CompatibleFeatureName, "compatible");
  add(autoclear, AutoclearFeatureName, "autoclear");
  return absl::StrJoin(names, ", ");
}

}  // namespace pvdisk::image::qcow2
