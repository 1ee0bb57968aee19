#include "cli/mount_helper.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/mount_flags.h"

namespace pvdisk::cli {
namespace {

// Options mount(8), fstab and systemd put on any line, which say nothing to
// pvdisk's daemon (the FUSE mount is nosuid and nodev already; "ro" is
// handled apart).
constexpr const char* kIgnoredOptions[] = {
    "rw",         "defaults",    "auto",     "noauto",     "user",
    "nouser",     "users",       "owner",    "group",      "_netdev",
    "nofail",     "dev",         "nodev",    "suid",       "nosuid",
    "exec",       "noexec",      "atime",    "noatime",    "relatime",
    "norelatime", "strictatime", "diratime", "nodiratime", "async",
    "lazytime",   "nolazytime",
};

bool Ignored(const std::string& name) {
  for (const char* ignored : kIgnoredOptions) {
    if (name == ignored) return true;
  }
  // x-systemd.automount, x-gvfs-show, comment=...: for other programs.
  return absl::StartsWith(name, "x-") || name == "comment";
}

// The mount flag an -o option names (allow_other = allow-other), or nullptr.
const FlagSpec* MountFlag(std::string name) {
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  if (name == "disk" || name == "help") return nullptr;
  for (const FlagSpec& flag : MountFlags()) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

std::string AllowedOptions() {
  std::vector<std::string> names;
  for (const FlagSpec& flag : MountFlags()) {
    if (flag.name == "disk" || flag.name == "help") continue;
    names.push_back(flag.takes_value ? flag.name + "=" + flag.value_name
                                     : flag.name);
  }
  return absl::StrCat(absl::StrJoin(names, ", "),
                      ", ro, and the generic rw, defaults, nofail, _netdev, "
                      "x-*, ...");
}

// SOURCE split into its disks: at ':', except the one after "rbd".
std::vector<std::string> SourceDisks(const std::string& source) {
  std::vector<std::string> parts = absl::StrSplit(source, ':');
  std::vector<std::string> disks;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "rbd" && i + 1 < parts.size()) {
      disks.push_back(absl::StrCat("rbd:", parts[++i]));
    } else {
      disks.push_back(parts[i]);
    }
  }
  return disks;
}

}  // namespace

bool IsMountHelperCall(const std::vector<std::string>& args) {
  if (args.size() < 2 || args[0].empty() || args[0][0] == '-') return false;
  if (FindCommand(args[0]) != nullptr) return false;
  struct stat st;
  return stat(args[1].c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<std::vector<std::string>> MountHelperArgs(
    const std::vector<std::string>& args) {
  constexpr const char* kUsage =
      "(as a mount helper: pvdisk IMG[:IMG...] MOUNTPOINT -o OPTIONS)";
  std::vector<std::string> positional, options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("-o needs a list of options ", kUsage));
      }
      for (absl::string_view option :
           absl::StrSplit(args[++i], ',', absl::SkipEmpty())) {
        options.emplace_back(option);
      }
    } else if (args[i] == "-n" || args[i] == "-v" || args[i] == "-f" ||
               args[i] == "-s") {
      // mount(8)'s no-mtab, verbose, fake and sloppy: nothing to do here.
    } else if (!args[i].empty() && args[i][0] == '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown mount helper argument '", args[i], "' ", kUsage));
    } else {
      positional.push_back(args[i]);
    }
  }
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a mount helper call takes a SOURCE and a MOUNTPOINT, got ",
        positional.size(), " words ", kUsage));
  }
  bool read_only = false;
  std::vector<std::string> flags;
  for (const std::string& option : options) {
    const size_t eq = option.find('=');
    const std::string name = option.substr(0, eq);
    if (name == "ro") {
      read_only = true;
      continue;
    }
    if (Ignored(name)) continue;
    const FlagSpec* flag = MountFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown mount option '", option, "'; allowed: ", AllowedOptions()));
    }
    if (flag->takes_value != (eq != std::string::npos)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount option '", option, "': ", flag->name,
          flag->takes_value ? absl::StrCat(" takes a value: ", flag->name, "=",
                                           flag->value_name)
                            : std::string(" takes no value")));
    }
    flags.push_back(flag->takes_value ? absl::StrCat("--", flag->name, "=",
                                                     option.substr(eq + 1))
                                      : absl::StrCat("--", flag->name));
  }
  std::vector<std::string> out = {positional[1]};
  for (const std::string& disk : SourceDisks(positional[0])) {
    if (disk.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mount source '", positional[0],
                       "' has an empty disk; give IMG[:IMG...]"));
    }
    out.push_back("--disk");
    out.push_back(read_only ? disk + ",ro" : disk);
  }
  out.insert(out.end(), flags.begin(), flags.end());
  return out;
}

int RunMountHelper(const std::vector<std::string>& args) {
  absl::StatusOr<std::vector<std::string>> mount_args = MountHelperArgs(args);
  if (!mount_args.ok()) {
    PrintError(std::string(mount_args.status().message()));
    return kExitUsage;
  }
  std::vector<std::string> words = {"pvdisk", "mount"};
  words.insert(words.end(), mount_args->begin(), mount_args->end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  PrintError(absl::StrCat("cannot run pvdisk mount: ", strerror(errno)));
  return kExitFailure;
}

}  // namespace pvdisk::cli
