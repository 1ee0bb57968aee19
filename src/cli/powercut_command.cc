// pvdisk powercut MOUNTPOINT [DISK] [--keep none|all|random] [--seed N]
//
// Cuts the power of one disk of a running mount that was mounted with
// --disk IMG,cache=volatile (io/volatile_cache.h): every later request on
// that disk fails with EIO (the mount's other disks go on), and the image
// keeps its durable writes plus the unflushed ones --keep says. The
// command goes to the daemon through the mount's stats file ("powercut
// DISK keep=K seed=N", stats/stats_command.h); what the cut did is read
// back from stats.json and printed. `pvdisk unmount` and a new mount are
// the reboot.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/mount_stats.h"

namespace pvdisk::cli {

const std::vector<FlagSpec>& PowercutFlags() {
  static const std::vector<FlagSpec> specs = {
      {"keep", true, false, "WHAT", "none",
       "which unflushed writes reach the image: none, all, or random (each "
       "write whole or not at all, by --seed)"},
      {"seed", true, false, "N", "a random one, printed",
       "the seed of --keep random: the same seed over the same writes keeps "
       "the same ones"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

namespace {

const stats::DiskDocument* FindDisk(const stats::StatsDocument& document,
                                    const std::string& name) {
  for (const stats::DiskDocument& disk : document.disks) {
    if (disk.name == name) return &disk;
  }
  return nullptr;
}

std::string ConfigOf(const stats::DiskDocument& disk, const std::string& key) {
  auto it = disk.config.find(key);
  return it == disk.config.end() ? std::string() : it->second;
}

}  // namespace

int RunPowercut(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs("powercut", PowercutFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("powercut");
    return kExitOk;
  }
  if (parsed->positional.empty() || parsed->positional.size() > 2) {
    PrintError(absl::StrCat(
        "pvdisk powercut takes MOUNTPOINT and optionally DISK, got ",
        parsed->positional.size(),
        " argument(s) (see pvdisk powercut --help)"));
    return kExitUsage;
  }
  const std::string keep = parsed->Get("keep", "none");
  if (keep != "none" && keep != "all" && keep != "random") {
    PrintError(
        absl::StrCat("--keep must be none, all or random, got '", keep, "'"));
    return kExitUsage;
  }
  uint64_t seed = std::random_device()();
  if (parsed->Has("seed")) {
    if (keep != "random") {
      PrintError("--seed applies to --keep random only");
      return kExitUsage;
    }
    absl::StatusOr<uint64_t> number =
        ParseNumber("--seed", parsed->Get("seed", ""), 0, UINT64_MAX);
    if (!number.ok()) {
      PrintError(std::string(number.status().message()));
      return kExitUsage;
    }
    seed = *number;
  }
  const std::string& mountpoint = parsed->positional[0];
  if (absl::StatusOr<MountEntry> mount = RequirePvdiskMount(mountpoint);
      !mount.ok()) {
    PrintError(std::string(mount.status().message()));
    return kExitUsage;
  }
  absl::StatusOr<stats::StatsDocument> before = ReadMountStats(mountpoint);
  if (!before.ok()) {
    PrintError(std::string(before.status().message()));
    return kExitFailure;
  }
  std::vector<std::string> names;
  for (const auto& disk : before->disks) names.push_back(disk.name);
  std::string name;
  if (parsed->positional.size() == 2) {
    name = parsed->positional[1];
  } else if (names.size() == 1) {
    name = names[0];
  } else {
    PrintError(absl::StrCat(
        mountpoint, " has ", names.size(),
        " disks; name the one to cut: ", absl::StrJoin(names, ", ")));
    return kExitUsage;
  }
  const stats::DiskDocument* disk = FindDisk(*before, name);
  if (disk == nullptr) {
    PrintError(absl::StrCat("no disk named '", name, "' in ", mountpoint,
                            "; disks: ", absl::StrJoin(names, ", ")));
    return kExitUsage;
  }
  if (ConfigOf(*disk, "cache") != "volatile") {
    PrintError(absl::StrCat(
        name, " has no volatile cache to lose; mount it with --disk ",
        ConfigOf(*disk, "image"), ",cache=volatile to cut its power"));
    return kExitUsage;
  }
  if (ConfigOf(*disk, "power") == "cut") {
    PrintError(absl::StrCat(name,
                            " has lost its power already; pvdisk "
                            "unmount and mount again to reboot it"));
    return kExitUsage;
  }
  const std::string command =
      absl::StrCat("powercut ", name, " keep=", keep, " seed=", seed, "\n");
  if (absl::Status sent = SendStatsCommand(
          mountpoint, command,
          absl::StrCat("the daemon refused the power cut of ", name));
      !sent.ok()) {
    PrintError(std::string(sent.message()));
    return kExitFailure;
  }
  absl::StatusOr<stats::StatsDocument> after = ReadMountStats(mountpoint);
  const stats::DiskDocument* cut =
      after.ok() ? FindDisk(*after, name) : nullptr;
  if (cut == nullptr) {
    PrintError(absl::StrCat("the power of ", name,
                            " is cut, but the daemon's report is unreadable"));
    return kExitFailure;
  }
  std::printf(
      "%s: power cut; dropped %s unflushed write(s) of %s bytes, kept %s of "
      "%s bytes (keep=%s%s)\n",
      name.c_str(), ConfigOf(*cut, "cut_dropped_writes").c_str(),
      ConfigOf(*cut, "cut_dropped_bytes").c_str(),
      ConfigOf(*cut, "cut_kept_writes").c_str(),
      ConfigOf(*cut, "cut_kept_bytes").c_str(), keep.c_str(),
      keep == "random" ? absl::StrCat(", seed=", seed).c_str() : "");
  return kExitOk;
}

}  // namespace pvdisk::cli
