// pvdisk replay LOG [IMAGE] (--to N | --to-flush N | --to-mark NAME | --list)
//
// Reads a write log in dm-log-writes' format (`--disk IMG,log=FILE`, the
// kernel's log-writes target, QEMU's blklogwrites) and either lists its
// entries, numbered from 0 with flushes counted from 1 (what xfstests'
// replay-log --find answers), or applies its entries up to a point to
// IMAGE: a copy of the image as it was when the log began. The log and the
// target are checked whole before IMAGE is opened for writing: a bad log or
// a target beyond its end leaves IMAGE unchanged.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "io/write_log_format.h"
#include "io/write_log_reader.h"
#include "io/write_log_replay.h"

namespace pvdisk::cli {

const std::vector<FlagSpec>& ReplayFlags() {
  static const std::vector<FlagSpec> specs = {
      {"to", true, false, "ENTRY", "",
       "apply entries 0 to ENTRY (as --list numbers them)"},
      {"to-flush", true, false, "N", "",
       "apply entries up to and including the Nth flush (from 1)"},
      {"to-mark", true, false, "NAME", "",
       "apply entries up to and including the first mark named NAME"},
      {"list", false, false, "", "",
       "print every entry: its number, sector, sectors, flags, and the "
       "flush's number or the mark's name"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

namespace {

void PrintList(const io::WriteLogIndex& index) {
  std::printf("%-8s %-12s %-8s %-10s %s\n", "ENTRY", "SECTOR", "SECTORS",
              "FLAGS", "FLUSH/MARK");
  uint64_t flushes = 0;
  for (size_t i = 0; i < index.entries.size(); ++i) {
    const io::WriteLogRecord& entry = index.entries[i];
    std::string note;
    if (entry.flags & io::kLogFlush) note = absl::StrCat("flush ", ++flushes);
    if (entry.flags & io::kLogMark) note = absl::StrCat("mark ", entry.mark);
    std::string line = absl::StrFormat(
        "%-8d %-12d %-8d %-10s %s", i, entry.sector, entry.nr_sectors,
        io::WriteLogFlagNames(entry.flags), note);
    line.erase(line.find_last_not_of(' ') + 1);
    std::printf("%s\n", line.c_str());
  }
  std::printf("%zu entries, %llu flushes, sector size %u\n",
              index.entries.size(), static_cast<unsigned long long>(flushes),
              index.sector_size);
}

}  // namespace

int RunReplay(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("replay", ReplayFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("replay");
    return kExitOk;
  }
  const int targets = parsed->Has("to") + parsed->Has("to-flush") +
                      parsed->Has("to-mark") + parsed->Has("list");
  if (targets != 1) {
    PrintError(
        "pvdisk replay takes one of --to ENTRY, --to-flush N, --to-mark NAME "
        "and --list (see pvdisk replay --help)");
    return kExitUsage;
  }
  const bool list = parsed->Has("list");
  const size_t want = list ? 1 : 2;
  if (parsed->positional.size() != want) {
    PrintError(absl::StrCat("pvdisk replay takes ",
                            list ? "LOG with --list" : "LOG and IMAGE",
                            ", got ", parsed->positional.size(),
                            " argument(s) (see pvdisk replay --help)"));
    return kExitUsage;
  }
  const std::string& log = parsed->positional[0];
  absl::StatusOr<io::WriteLogIndex> index = io::ReadWriteLogIndex(log);
  if (!index.ok()) {
    PrintError(std::string(index.status().message()));
    return kExitUsage;
  }
  if (list) {
    PrintList(*index);
    return kExitOk;
  }
  const uint64_t entries = index->entries.size();
  uint64_t count = 0;  // how many entries to apply
  std::string what;
  if (parsed->Has("to")) {
    absl::StatusOr<uint64_t> entry =
        ParseNumber("--to", parsed->Get("to", ""), 0, UINT64_MAX - 1);
    if (!entry.ok()) {
      PrintError(std::string(entry.status().message()));
      return kExitUsage;
    }
    if (*entry >= entries) {
      PrintError(absl::StrCat(
          "--to ", *entry, " is past the end of ", log,
          ", whose entries are 0 to ",
          entries == 0 ? std::string("(none)") : absl::StrCat(entries - 1)));
      return kExitUsage;
    }
    count = *entry + 1;
    what = absl::StrCat("entry ", *entry);
  } else if (parsed->Has("to-flush")) {
    absl::StatusOr<uint64_t> n =
        ParseNumber("--to-flush", parsed->Get("to-flush", ""), 1, UINT64_MAX);
    if (!n.ok()) {
      PrintError(std::string(n.status().message()));
      return kExitUsage;
    }
    uint64_t flushes = 0;
    for (uint64_t i = 0; i < entries && count == 0; ++i) {
      if ((index->entries[i].flags & io::kLogFlush) && ++flushes == *n) {
        count = i + 1;
      }
    }
    if (count == 0) {
      PrintError(absl::StrCat("--to-flush ", *n, " is past the end of ", log,
                              ", which has ", flushes, " flush(es)"));
      return kExitUsage;
    }
    what = absl::StrCat("flush ", *n, " (entry ", count - 1, ")");
  } else {
    const std::string name = parsed->Get("to-mark", "");
    std::vector<std::string> marks;
    for (uint64_t i = 0; i < entries && count == 0; ++i) {
      if (!(index->entries[i].flags & io::kLogMark)) continue;
      if (index->entries[i].mark == name) count = i + 1;
      marks.push_back(index->entries[i].mark);
    }
    if (count == 0) {
      std::string names;
      for (const std::string& mark : marks) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", mark);
      }
      PrintError(absl::StrCat("--to-mark ", name, ": ", log,
                              " has no such mark; its marks: ",
                              names.empty() ? std::string("none") : names));
      return kExitUsage;
    }
    what = absl::StrCat("mark ", name, " (entry ", count - 1, ")");
  }
  const std::string& image = parsed->positional[1];
  if (absl::Status replayed = io::ReplayWriteLog(log, *index, count, image);
      !replayed.ok()) {
    PrintError(std::string(replayed.message()));
    return replayed.code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                 : kExitFailure;
  }
  std::printf("%s: applied %llu of %llu entries of %s, up to %s\n",
              image.c_str(), static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(entries), log.c_str(),
              what.c_str());
  return kExitOk;
}

}  // namespace pvdisk::cli
