// The system's transparent huge page setting, as the tests of the FUSE
// payload arena need it to know what to expect. Shared by the test suites.
#pragma once

#include <fstream>
#include <string>

namespace pvdisk::testing {

// "always", "madvise" or "never": the bracketed word of
// /sys/kernel/mm/transparent_hugepage/enabled; "none" on a kernel without
// transparent huge pages.
inline std::string ThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!in || !std::getline(in, line)) return "none";
  size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos) return "none";
  return line.substr(open + 1, close - open - 1);
}

}  // namespace pvdisk::testing
