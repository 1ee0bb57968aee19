#include "cli/daemon_args.h"

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/mount_flags.h"
#include "fuse/disk.h"

namespace pvdisk::cli {

std::optional<std::vector<std::string>> MountArguments(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  if (!in) return std::nullopt;
  std::string raw((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  for (size_t start = 0; start < raw.size();) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    argv.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  if (argv.size() < 2 || argv[1] != "mount") return std::nullopt;
  return std::vector<std::string>(argv.begin() + 2, argv.end());
}

std::optional<uint32_t> DaemonShutdownTimeout(pid_t pid) {
  std::optional<std::vector<std::string>> args = MountArguments(pid);
  if (!args) return std::nullopt;
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("mount", MountFlags(), *args);
  if (!parsed.ok()) return std::nullopt;
  absl::StatusOr<uint64_t> seconds = ParseNumber(
      "shutdown-timeout",
      parsed->Get("shutdown-timeout",
                  absl::StrCat(fuse::kDefaultShutdownTimeoutSeconds)),
      fuse::kMinShutdownTimeoutSeconds, fuse::kMaxShutdownTimeoutSeconds);
  if (!seconds.ok()) return std::nullopt;
  return static_cast<uint32_t>(*seconds);
}

}  // namespace pvdisk::cli
