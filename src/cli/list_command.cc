// pvdisk list [--json]
//
// Every pvdisk mount of this mount namespace: its daemon's pid (from the
// mount table), its disks and their sizes (from its stats.json) and the
// flags it was mounted with that differ from the defaults (from the
// daemon's command line, /proc/PID/cmdline: the daemon is the forked
// `pvdisk mount`, so its argv is the user's) and where it logs (a daemon's
// log file is its stderr, /proc/PID/fd/2; else syslog or stderr, as its
// --log says).
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/size.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/daemon_args.h"
#include "cli/mount_flags.h"
#include "cli/mount_stats.h"
#include "stats/render.h"

namespace pvdisk::cli {

const std::vector<FlagSpec>& ListFlags() {
  static const std::vector<FlagSpec> specs = {
      {"json", false, false, "", "", "print one JSON object"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

namespace {

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
  std::string log;                 // a path, "syslog", "stderr" or "unknown"
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
        spec.name == "help" || spec.name == "log" || !parsed->Has(spec.name)) {
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

// The target of /proc/PID/LINK, or "".
std::string ProcLink(pid_t pid, const char* link) {
  char target[PATH_MAX];
  std::string path = absl::StrCat("/proc/", pid, "/", link);
  ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
  return n > 0 ? std::string(target, n) : std::string();
}

// Where the daemon `pid`, started with `args`, writes its log.
std::string DaemonLog(pid_t pid, const std::vector<std::string>* args) {
  std::optional<ParsedArgs> parsed;
  if (args != nullptr) {
    absl::StatusOr<ParsedArgs> got = ParseArgs("mount", MountFlags(), *args);
    if (got.ok()) parsed = *got;
  }
  const std::string value = parsed ? parsed->Get("log", "") : "";
  if (value == "syslog") return "syslog";
  std::string stderr_target = ProcLink(pid, "fd/2");
  struct stat st;
  if (!stderr_target.empty() && stderr_target[0] == '/' &&
      stat(stderr_target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return stderr_target;
  }
  if (!parsed) return "unknown";
  // A --foreground mount keeps its terminal as stderr and its directory.
  if (!value.empty()) {
    return value[0] == '/' ? value
                           : absl::StrCat(ProcLink(pid, "cwd"), "/", value);
  }
  return parsed->Has("foreground") ? "stderr" : "unknown";
}

ListedMount Describe(const MountEntry& entry) {
  ListedMount mount;
  mount.mountpoint = entry.mount_point;
  mount.daemon_pid = *PvdiskDaemonPid(entry);
  std::optional<std::vector<std::string>> args =
      MountArguments(mount.daemon_pid);
  if (args) {
    if (auto flags = NonDefaultFlags(*args)) {
      mount.flags = *flags;
      mount.flags_known = true;
    }
  }
  mount.log = DaemonLog(mount.daemon_pid, args ? &*args : nullptr);
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
                    "  log: ", mount.log, "\n");
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
        ", \"daemon_pid\": ", mount.daemon_pid,
        ", \"log\": ", stats::JsonString(mount.log), ", \"flags\": ",
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
    PrintCommandHelp("list");
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
