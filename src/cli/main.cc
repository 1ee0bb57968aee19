// pvdisk: a user-space paravirtual disk. See README.md.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: pvdisk COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  create PATH --size SIZE [...]        make a sparse raw or qcow2 image\n"
    "  info IMAGE [--json]                  an image's format, size and "
    "backing chain\n"
    "  mount MOUNTPOINT --disk IMAGE [...]  serve images as files through "
    "FUSE\n"
    "  unmount MOUNTPOINT                   stop the daemon cleanly and "
    "unmount\n"
    "  stat MOUNTPOINT [--interval S] [...] iostat -x of a mount, per disk "
    "and queue\n"
    "  list [--json]                        every pvdisk mount, its daemon, "
    "disks and flags\n"
    "  trace MOUNTPOINT -o DIR [...]        record a disk's requests for "
    "blkparse, btt or Perfetto\n"
    "  powercut MOUNTPOINT [DISK] [...]     cut a cache=volatile disk's "
    "power\n"
    "\n"
    "'pvdisk COMMAND --help' lists a command's flags; 'pvdisk --version' "
    "prints the version.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace pvdisk::cli;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (command == "--version" || command == "version") {
    std::printf("pvdisk %s\n", PVDISK_VERSION);
    return kExitOk;
  }
  if (command == "create") return RunCreate(args);
  if (command == "mount") return RunMount(args);
  if (command == "unmount" || command == "umount") return RunUnmount(args);
  if (command == "__backend") return RunBackend(args);
  if (command == "stat") return RunStat(args);
  if (command == "list") return RunList(args);
  if (command == "info") return RunInfo(args);
  if (command == "trace") return RunTrace(args);
  if (command == "powercut") return RunPowercut(args);
  PrintError(
      "unknown command '" + command +
      "'; allowed: create, info, mount, unmount, stat, list, trace, powercut, "
      "--version "
      "(see "
      "pvdisk --help)");
  return kExitUsage;
}
