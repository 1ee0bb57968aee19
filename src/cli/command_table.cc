#include "cli/command_table.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/disk_options.h"
#include "cli/mount_flags.h"
#include "stats/iostat.h"

namespace pvdisk::cli {
namespace {

std::string StatDetails() {
  std::string out = "columns:\n";
  for (const stats::IostatColumn& column : stats::kIostatColumns) {
    std::string name = absl::StrCat("  ", column.name);
    if (name.size() < 15) name.resize(15, ' ');
    absl::StrAppend(&out, name, column.meaning, "\n");
  }
  return out;
}

std::string MountDetails() {
  std::string out = "--disk options:\n";
  for (const DiskOptionInfo& option : DiskOptions()) {
    std::string name = absl::StrCat("  ", std::string(option.syntax));
    if (name.size() < 28) name.resize(28, ' ');
    absl::StrAppend(&out, name, " ", std::string(option.help));
    if (!option.applies.empty())
      absl::StrAppend(&out, " (", std::string(option.applies), ")");
    out += "\n";
  }
  return out;
}

// `text` broken into lines of at most 79 columns at spaces.
std::string Wrap(std::string_view text) {
  std::string out, line;
  for (absl::string_view word :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ' ',
                      absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > 79) {
      absl::StrAppend(&out, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, line, "\n");
  return out;
}

// The synopsis up to its first optional part, which "[...]" stands for.
std::string ShortSynopsis(std::string_view synopsis) {
  const size_t optional = synopsis.find(" [");
  if (optional == std::string_view::npos) return std::string(synopsis);
  return absl::StrCat(std::string(synopsis.substr(0, optional)), " [...]");
}

}  // namespace

const std::vector<CommandInfo>& Commands() {
  static const std::vector<CommandInfo> commands = {
      {"create", "PATH --size SIZE [flags]", "make a sparse raw or qcow2 image",
       "Makes a sparse raw image, or a qcow2 image (optionally on a backing "
       "file), at PATH. An existing file is refused unless --force.",
       CreateFlags, RunCreate},
      {"info", "IMAGE [--json]", "an image's format, size and backing chain",
       "Prints each layer of an image's backing chain: path, format, virtual "
       "size, file size and, for qcow2, its header's fields. An image pvdisk "
       "would refuse is one line on stderr and exit status 2.",
       InfoFlags, RunInfo},
      {"mount", "MOUNTPOINT --disk IMAGE [--disk IMAGE ...] [flags]",
       "serve images as files through FUSE",
       "Serves each --disk as a file of the mount named after its image, "
       "beside the files stats, stats.json and metrics (see pvdisk-stats(5)). "
       "Every flag, image, image lock and the memory budget is checked "
       "before anything is made. Without --foreground it returns once the "
       "mount serves, and a daemon keeps serving until pvdisk unmount, "
       "umount, SIGTERM, SIGINT or SIGHUP.",
       MountFlags, RunMount, MountDetails},
      {"unmount", "MOUNTPOINT", "stop the daemon cleanly and unmount",
       "Stops the mount's daemon: I/O in flight finishes (up to its "
       "--shutdown-timeout), writes are flushed, the image locks are released "
       "and the mount goes away. Also called umount.",
       UnmountFlags, RunUnmount},
      {"stat", "MOUNTPOINT [--interval S] [--count N] [flags]",
       "iostat -x of a mount, per disk and queue",
       "Prints iostat -x style rows of a mount every interval, one per disk "
       "(and per queue with --queues), as rates over the interval from the "
       "mount's stats.json. The first report covers the time since the "
       "mount.",
       StatFlags, RunStat, StatDetails},
      {"list", "[--json]", "every pvdisk mount, its daemon, disks and flags",
       "Lists every pvdisk mount of the machine: mountpoint, daemon pid, the "
       "flags it was mounted with that differ from the defaults, its log and "
       "its disks.",
       ListFlags, RunList},
      {"trace", "MOUNTPOINT -o DIR [--disk NAME] [--seconds S] [--format F]",
       "record a disk's requests for blkparse, btt or Perfetto",
       "Records every request of a disk (Q, M/F, G, I, D, C, and pvdisk's "
       "own steps) until S seconds or Ctrl-C, as blktrace files for blkparse "
       "and btt, or a Perfetto trace.",
       TraceFlags, RunTrace},
      {"powercut", "MOUNTPOINT [DISK] [--keep none|all|random] [--seed N]",
       "cut a cache=volatile disk's power",
       "Cuts the power of a disk mounted with cache=volatile: every later I/O "
       "on it fails with EIO (the mount's other disks go on), and the image "
       "keeps what was flushed plus the unflushed writes --keep says, each "
       "write whole or not at all. It prints what was dropped. Unmount and "
       "mount again to reboot.",
       PowercutFlags, RunPowercut},
      {"mark", "MOUNTPOINT [DISK] NAME", "add a mark to a disk's write log",
       "Adds a mark named NAME to the write log of a disk mounted with "
       "log=FILE, after every I/O that completed before it: pvdisk replay "
       "--to-mark NAME rebuilds the image as it was then. The same as "
       "writing 'mark DISK NAME' to the mount's stats file.",
       MarkFlags, RunMark},
      {"replay", "LOG [IMAGE] (--to ENTRY|--to-flush N|--to-mark NAME|--list)",
       "rebuild an image at a point of its write log",
       "Applies a write log's entries (dm-log-writes' format, as log=FILE "
       "writes it) in order to IMAGE, a copy of the image as it was when the "
       "log began, up to the entry, flush or mark given; or lists the "
       "entries. A log that is not whole or a point past its end is refused "
       "with IMAGE unchanged.",
       ReplayFlags, RunReplay},
      {"attach", "MOUNTPOINT --disk IMAGE [flags]",
       "add a disk to a running mount",
       "Adds a disk to a running mount, after the checks a mount makes (the "
       "image, its lock, permissions, format, the memory budget). Its "
       "transport is the mount's unless flags give it; on a mount of the "
       "inline placement it runs on backend threads of its own. The other "
       "disks' I/O goes on meanwhile. Only the user who mounted may attach.",
       AttachFlags, RunAttach},
      {"detach", "MOUNTPOINT DISK [--force]",
       "take a disk out of a running mount",
       "Takes a disk out of a running mount: its I/O in flight finishes, its "
       "writes are made durable, its image lock is released and its file "
       "goes. A disk whose file a process holds open is refused with EBUSY "
       "naming the pid, unless --force, after which that process's I/O "
       "fails with EIO. Only the user who mounted may detach.",
       DetachFlags, RunDetach},
  };
  return commands;
}

const CommandInfo* FindCommand(std::string_view name) {
  if (name == "umount") name = "unmount";
  for (const CommandInfo& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::string MainHelp() {
  std::string out = "usage: pvdisk COMMAND [ARGS]\n\ncommands:\n";
  for (const CommandInfo& command : Commands()) {
    std::string left = absl::StrCat("  ", std::string(command.name), " ",
                                    ShortSynopsis(command.synopsis));
    if (left.size() < 38) left.resize(38, ' ');
    absl::StrAppend(&out, left, " ", std::string(command.summary), "\n");
  }
  absl::StrAppend(&out, "\n",
                  Wrap("'pvdisk COMMAND --help' lists a command's flags, "
                       "'pvdisk --version' prints the version, and pvdisk(1) "
                       "(man pvdisk) describes it all."));
  return out;
}

std::string CommandHelp(const CommandInfo& command) {
  std::string out = absl::StrCat("usage: pvdisk ", std::string(command.name),
                                 " ", std::string(command.synopsis), "\n",
                                 Wrap(command.description));
  if (command.details != nullptr) out += command.details();
  absl::StrAppend(&out, "flags:\n", FlagHelp(command.flags()));
  return out;
}

void PrintCommandHelp(std::string_view name) {
  const CommandInfo* command = FindCommand(name);
  if (command != nullptr) std::fputs(CommandHelp(*command).c_str(), stdout);
}

}  // namespace pvdisk::cli
