#include "cli/mount_table.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"

namespace pvdisk::cli {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = field[i + k];
        if (c < '0' || c > '7') ok = false;
        value = value * 8 + (c - '0');
      }
      if (ok) {
        out += static_cast<char>(value);
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

}  // namespace

std::vector<MountEntry> AllMounts() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::vector<MountEntry> entries;
  while (std::getline(in, line)) {
    // id parent major:minor root mount_point options [optional...] - type
    // source super
    std::istringstream words(line);
    std::string id, parent, dev, root, mount_point;
    words >> id >> parent >> dev >> root >> mount_point;
    std::string word;
    while (words >> word && word != "-") {
    }
    MountEntry entry;
    words >> entry.fs_type >> entry.source;
    entry.mount_point = Unescape(mount_point);
    entry.source = Unescape(entry.source);
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::optional<MountEntry> FindMount(const std::string& absolute_path) {
  std::optional<MountEntry> found;
  for (MountEntry& entry : AllMounts()) {
    if (entry.mount_point == absolute_path) found = std::move(entry);
  }
  return found;
}

std::optional<pid_t> PvdiskDaemonPid(const MountEntry& entry) {
  static constexpr std::string_view kPrefix = "pvdisk-";
  if (entry.fs_type != "fuse.pvdisk" || entry.source.rfind(kPrefix, 0) != 0) {
    return std::nullopt;
  }
  int pid = 0;
  if (!absl::SimpleAtoi(entry.source.substr(kPrefix.size()), &pid) ||
      pid <= 0) {
    return std::nullopt;
  }
  return pid;
}

std::optional<std::string> AbsoluteMountPath(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  size_t slash = trimmed.rfind('/');
  std::string parent = slash == std::string::npos ? "."
                       : slash == 0               ? "/"
                                                  : trimmed.substr(0, slash);
  std::string name =
      slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    char resolved[PATH_MAX];
    if (realpath(trimmed.c_str(), resolved) == nullptr) return std::nullopt;
    return std::string(resolved);
  }
  char resolved[PATH_MAX];
  if (realpath(parent.c_str(), resolved) == nullptr) return std::nullopt;
  std::string out(resolved);
  if (out != "/") out += "/";
  return out + name;
}

}  // namespace pvdisk::cli
