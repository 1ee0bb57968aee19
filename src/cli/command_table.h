// The table of pvdisk's commands: what `pvdisk` dispatches on, what
// `pvdisk --help` and each command's --help print, and what the man page
// generator (man_page.h) writes. One table, so that the help and the man page
// say the same and cannot drift apart.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"

namespace pvdisk::cli {

struct CommandInfo {
  std::string_view name;      // e.g. "mount"
  std::string_view synopsis;  // the words after the name, e.g. "MOUNTPOINT"
  std::string_view summary;   // one line: `pvdisk --help`
  // A paragraph: each command's --help after the usage line, and the man
  // page's description of the command.
  std::string_view description;
  const std::vector<FlagSpec>& (*flags)();
  int (*run)(const std::vector<std::string>& args);
  // More help after the description (e.g. stat's columns), or nullptr.
  std::string (*details)() = nullptr;
};

// The user's commands, in the order `pvdisk --help` lists them (the hidden
// `__backend` is not one of them).
const std::vector<CommandInfo>& Commands();

// The command named `name`, or nullptr. "umount" is unmount's other name.
const CommandInfo* FindCommand(std::string_view name);

// `pvdisk --help`: the usage line and one line per command.
std::string MainHelp();

// A command's --help: usage, description, details and its flags.
std::string CommandHelp(const CommandInfo& command);

// Prints CommandHelp of the command `name` to stdout.
void PrintCommandHelp(std::string_view name);

// Each command's flags (mount's: mount_flags.h).
const std::vector<FlagSpec>& CreateFlags();
const std::vector<FlagSpec>& InfoFlags();
const std::vector<FlagSpec>& UnmountFlags();
const std::vector<FlagSpec>& StatFlags();
const std::vector<FlagSpec>& ListFlags();
const std::vector<FlagSpec>& TraceFlags();
const std::vector<FlagSpec>& PowercutFlags();
const std::vector<FlagSpec>& MarkFlags();
const std::vector<FlagSpec>& ReplayFlags();
const std::vector<FlagSpec>& AttachFlags();
const std::vector<FlagSpec>& DetachFlags();

}  // namespace pvdisk::cli
