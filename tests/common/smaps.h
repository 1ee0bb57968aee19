// One field of this process's /proc/self/smaps, for the tests that check
// which memory is in transparent huge pages. Shared by the test suites.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace pvdisk::testing {

// The value of `field` ("THPeligible", "AnonHugePages" in KiB, ...) of the
// mapping that holds `at`; -1 if no mapping holds it or it has no such
// field.
inline long SmapsField(const void* at, const std::string& field) {
  std::ifstream in("/proc/self/smaps");
  const auto address = reinterpret_cast<uintptr_t>(at);
  bool inside = false;
  std::string line;
  while (std::getline(in, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= address && address < end;
      continue;
    }
    if (inside && line.rfind(field + ":", 0) == 0) {
      return std::stol(line.substr(field.size() + 1));
    }
  }
  return -1;
}

}  // namespace pvdisk::testing
