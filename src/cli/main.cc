// pvdisk: a user-space paravirtual disk. See README.md and pvdisk(1).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/mount_helper.h"

int main(int argc, char** argv) {
  using namespace pvdisk::cli;
  if (argc < 2) {
    std::fputs(MainHelp().c_str(), stderr);
    return kExitUsage;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(MainHelp().c_str(), stdout);
    return kExitOk;
  }
  if (command == "--version" || command == "version") {
    std::printf("pvdisk %s\n", PVDISK_VERSION);
    return kExitOk;
  }
  if (command == "__backend") return RunBackend(args);
  if (const CommandInfo* found = FindCommand(command)) return found->run(args);
  // mount.fuse3 runs `pvdisk SOURCE MOUNTPOINT -o OPTIONS`.
  std::vector<std::string> all(argv + 1, argv + argc);
  if (IsMountHelperCall(all)) return RunMountHelper(all);
  std::string names;
  for (const CommandInfo& known : Commands()) {
    absl::StrAppend(&names, std::string(known.name), ", ");
  }
  PrintError(absl::StrCat("unknown command '", command, "'; allowed: ", names,
                          "--version (see pvdisk --help)"));
  return kExitUsage;
}
