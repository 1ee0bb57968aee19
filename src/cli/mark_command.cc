// pvdisk mark MOUNTPOINT [DISK] NAME
//
// Adds a mark named NAME to the write log of a disk mounted with
// --disk IMG,log=FILE (io/write_log.h), between the entries of the I/O that
// completed before and after it: `pvdisk replay --to-mark NAME` rebuilds
// the image as it was then. The command goes to the daemon through the
// mount's stats file ("mark DISK NAME", stats/stats_command.h).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/mount_stats.h"
#include "io/write_log_format.h"

namespace pvdisk::cli {

const std::vector<FlagSpec>& MarkFlags() {
  static const std::vector<FlagSpec> specs = {
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

int RunMark(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("mark", MarkFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("mark");
    return kExitOk;
  }
  const std::vector<std::string>& words = parsed->positional;
  if (words.size() < 2 || words.size() > 3) {
    PrintError(absl::StrCat(
        "pvdisk mark takes MOUNTPOINT, optionally DISK, and NAME, got ",
        words.size(), " argument(s) (see pvdisk mark --help)"));
    return kExitUsage;
  }
  const std::string& mountpoint = words[0];
  const std::string& name = words.back();
  if (name.empty() || name.size() > io::kMaxMarkLength ||
      name.find_first_of(" \t\n") != std::string::npos) {
    PrintError(absl::StrCat("a mark's name is 1 to ", io::kMaxMarkLength,
                            " characters without spaces, not '", name, "'"));
    return kExitUsage;
  }
  if (absl::StatusOr<MountEntry> mount = RequirePvdiskMount(mountpoint);
      !mount.ok()) {
    PrintError(std::string(mount.status().message()));
    return kExitUsage;
  }
  absl::StatusOr<stats::StatsDocument> document = ReadMountStats(mountpoint);
  if (!document.ok()) {
    PrintError(std::string(document.status().message()));
    return kExitFailure;
  }
  std::vector<std::string> logged, names;
  for (const stats::DiskDocument& disk : document->disks) {
    names.push_back(disk.name);
    auto log = disk.config.find("log");
    if (log != disk.config.end() && log->second != "none") {
      logged.push_back(disk.name);
    }
  }
  std::string disk;
  if (words.size() == 3) {
    disk = words[1];
    if (std::find(names.begin(), names.end(), disk) == names.end()) {
      PrintError(absl::StrCat("no disk named '", disk, "' in ", mountpoint,
                              "; disks: ", absl::StrJoin(names, ", ")));
      return kExitUsage;
    }
    if (std::find(logged.begin(), logged.end(), disk) == logged.end()) {
      PrintError(absl::StrCat(disk,
                              " has no write log to mark; mount it "
                              "with --disk IMG,log=FILE"));
      return kExitUsage;
    }
  } else if (logged.size() == 1) {
    disk = logged[0];
  } else {
    PrintError(logged.empty()
                   ? absl::StrCat("no disk of ", mountpoint,
                                  " has a write log; mount one with --disk "
                                  "IMG,log=FILE")
                   : absl::StrCat(mountpoint, " has ", logged.size(),
                                  " disks with a write log; name the one to "
                                  "mark: ",
                                  absl::StrJoin(logged, ", ")));
    return kExitUsage;
  }
  const std::string command = absl::StrCat("mark ", disk, " ", name, "\n");
  if (absl::Status sent = SendStatsCommand(
          mountpoint, command,
          absl::StrCat("the daemon refused the mark of ", disk));
      !sent.ok()) {
    PrintError(std::string(sent.message()));
    return kExitFailure;
  }
  std::printf("%s: mark %s\n", disk.c_str(), name.c_str());
  return kExitOk;
}

}  // namespace pvdisk::cli
