// pvdisk list [--json]
//
// Every pvdisk mount of this mount namespace: its daemon's pid (from the
// mount table), its disks and their sizes (from its stats.json) and the
// flags it was mounted with that differ from the defaults (from the
// daemon's command line, /proc/PID/cmdline: the daemon is the forked
// `pvdisk mount`, so its argv is the user's).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/size.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/daemon_args.h"
#include "cli/mount_flags.h"
#include "cli/mount_stats.h"
#include "stats/render.h"

namespace pvdisk::cli {
namespace {

const std::vector<FlagSpec>& ListFlags() {
  static const std::vector<FlagSpec> specs = {
      {"json", false, false, "", "", "print one JSON object"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

struct ListedDisk {
  std::string name;
  std::string image;
  uint64_t size = 0;
  bool read_only = false;
};

struct ListedMount {
  std::string mountpoint;
  pid_t daemon_pid = 0;
  std::vector<std::string> flags;  // non-default, as "--name=value"
  bool flags_known = false;        // false: the command line was unreadable
  std::vector<ListedDisk> disks;
  std::string problem;  // why the disks are unknown, if they are
};

// The flags of `args` whose value is not the flag's default. --disk (shown
// as the disks), --foreground and --help are left out.
std::optional<std::vector<std::string>> NonDefaultFlags(
    const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("mount", MountFlags(), args);
  if (!parsed.ok()) return std::nullopt;
  std::vector<std::string> out;
  for (const FlagSpec& spec : MountFlags()) {
    if (spec.name == "disk" || spec.name == "foreground" ||
        spec.name == "help" || !parsed->Has(spec.name)) {
      continue;
    }
    if (!spec.takes_value) {
      out.push_back("--" + spec.name);
      continue;
    }
    std::string value = parsed->Get(spec.name, "");
    if (value != spec.default_text) {
      out.push_back(absl::StrCat("--", spec.name, "=", value));
    }
  }
  return out;
}

ListedMount Describe(const MountEntry& entry) {
  ListedMount mount;
  mount.mountpoint = entry.mount_point;
  mount.daemon_pid = *PvdiskDaemonPid(entry);
  if (auto args = MountArguments(mount.daemon_pid)) {
    if (auto flags = NonDefaultFlags(*args)) {
      mount.flags = *flags;
      mount.flags_known = true;
    }
  }
  absl::StatusOr<stats::StatsDocument> document =
      ReadMountStats(entry.mount_point);
  if (!document.ok()) {
    mount.problem = std::string(document.status().message());
    return mount;
  }
  for (const stats::DiskDocument& disk : document->disks) {
    ListedDisk listed;
    listed.name = disk.name;
    auto get = [&](const std::string& key) {
      auto it = disk.config.find(key);
      return it == disk.config.end() ? std::string() : it->second;
    };
    listed.image = get("image");
    listed.size = std::strtoull(get("size").c_str(), nullptr, 10);
    listed.read_only = get("read_only") == "yes";
    mount.disks.push_back(listed);
  }
  return mount;
}

std::string Text(const std::vector<ListedMount>& mounts) {
  if (mounts.empty()) return "no pvdisk mounts\n";
  std::string out;
  for (const ListedMount& mount : mounts) {
    absl::StrAppend(&out, mount.mountpoint, "  daemon pid ", mount.daemon_pid,
                    "  flags: ",
                    !mount.flags_known    ? "unknown"
                    : mount.flags.empty() ? "defaults"
                                          : absl::StrJoin(mount.flags, " "),
                    "\n");
    if (!mount.problem.empty()) {
      absl::StrAppend(&out, "  (disks unknown: ", mount.problem, ")\n");
    }
    for (const ListedDisk& disk : mount.disks) {
      absl::StrAppend(&out, "  ", disk.name, "  ", FormatSize(disk.size),
                      disk.read_only ? "  read-only" : "", "  ", disk.image,
                      "\n");
    }
  }
  return out;
}

std::string Json(const std::vector<ListedMount>& mounts) {
  std::vector<std::string> items;
  for (const ListedMount& mount : mounts) {
    std::vector<std::string> disks;
    for (const ListedDisk& disk : mount.disks) {
      disks.push_back(absl::StrCat(
          "{\"name\": ", stats::JsonString(disk.name), ", \"image\": ",
          stats::JsonString(disk.image), ", \"size\": ", disk.size,
          ", \"read_only\": ", disk.read_only ? "true" : "false", "}"));
    }
    std::vector<std::string> flags;
    for (const std::string& flag : mount.flags) {
      flags.push_back(stats::JsonString(flag));
    }
    items.push_back(absl::StrCat(
        "{\"mountpoint\": ", stats::JsonString(mount.mountpoint),
        ", \"daemon_pid\": ", mount.daemon_pid, ", \"flags\": ",
        mount.flags_known ? absl::StrCat("[", absl::StrJoin(flags, ", "), "]")
                          : "null",
        ", \"disks\": [", absl::StrJoin(disks, ", "), "]",
        mount.problem.empty()
            ? ""
            : absl::StrCat(", \"problem\": ", stats::JsonString(mount.problem)),
        "}"));
  }
  return absl::StrCat("{\"mounts\": [", absl::StrJoin(items, ", "), "]}\n");
}

}  // namespace

int RunList(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("list", ListFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    std::printf("usage: pvdisk list [--json]\n%s",
                FlagHelp(ListFlags()).c_str());
    return kExitOk;
  }
  if (!parsed->positional.empty()) {
    PrintError(absl::StrCat("pvdisk list takes no arguments, got '",
                            parsed->positional[0], "'; allowed: --json"));
    return kExitUsage;
  }
  std::vector<ListedMount> mounts;
  for (const MountEntry& entry : AllPvdiskMounts()) {
    mounts.push_back(Describe(entry));
  }
  std::string out = parsed->Has("json") ? Json(mounts) : Text(mounts);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace pvdisk::cli
