// pvdisk attach MOUNTPOINT --disk SPEC [transport flags]
// pvdisk detach MOUNTPOINT NAME [--force]
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "cli/args.h"
#include "cli/attach.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/disk_arg.h"
#include "cli/mount_flags.h"
#include "cli/mount_stats.h"
#include "fuse/disk_control.h"
#include "fuse/disk_list_check.h"
#include "fuse/disk_options_check.h"
#include "transport/memory_budget.h"
#include "transport/transport_flags.h"

namespace pvdisk::cli {
namespace {

// The mount flags an attached disk may set for itself: its transport's.
constexpr const char* kTransportFlags[] = {
    "frontend",        "ring-size",    "queues",     "queue-map",
    "backend-threads", "max-segments", "persistent", "notify",
    "nvme-data",       "irq-coalesce", "irq",        "merge",
    "dispatch",        "plug-us",      "poll-us",    "engine-max-inflight"};

// The disk's argument with its image path made absolute (the daemon runs
// in /).
std::string AbsoluteDiskArg(const std::string& arg,
                            const fuse::DiskSpec& spec) {
  if (spec.rbd) return arg;
  const size_t comma = arg.find(',');
  return comma == std::string::npos ? spec.path : spec.path + arg.substr(comma);
}

// Writes `request` into MOUNTPOINT/.control and prints the answer on
// failure; the exit code: 2 for a refusal (the mount is unchanged), 1 for
// a failure after the command was taken (a detach whose disk did not
// drain in time).
int SendControl(const std::string& mountpoint,
                const fuse::ControlRequest& request) {
  const std::string path = absl::StrCat(mountpoint, "/", fuse::kControlName);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int open_errno = errno;
    PrintError(absl::StrCat("cannot open ", path, ": ", strerror(open_errno),
                            open_errno == EACCES
                                ? " (only the user who mounted it may attach "
                                  "and detach disks)"
                                : ""));
    return open_errno == EACCES ? kExitUsage : kExitFailure;
  }
  const std::string text = fuse::FormatControlRequest(request);
  const ssize_t wrote = write(fd, text.data(), text.size());
  const int write_errno = errno;
  char answer[4096];
  const ssize_t got = read(fd, answer, sizeof(answer) - 1);
  close(fd);
  if (wrote == static_cast<ssize_t>(text.size())) return kExitOk;
  std::string message =
      got > 0 ? std::string(answer, static_cast<size_t>(got)) : "";
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (message.empty()) message = strerror(write_errno);
  PrintError(message);
  return write_errno == EIO ? kExitFailure : kExitUsage;
}

}  // namespace

const std::vector<FlagSpec>& AttachFlags() {
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> specs = {
        {"disk", true, false, "PATH[,OPTION...]", "",
         "the image to add, as mount's --disk (the options are listed under "
         "--disk options)"}};
    for (const char* name : kTransportFlags) {
      for (const FlagSpec& flag : MountFlags()) {
        if (flag.name == name) {
          FlagSpec own = flag;
          own.default_text = "the mount's";
          specs.push_back(own);
        }
      }
    }
    specs.push_back({"help", false, false, "", "", "show this help"});
    return specs;
  }();
  return specs;
}

const std::vector<FlagSpec>& DetachFlags() {
  static const std::vector<FlagSpec> specs = {
      {"force", false, false, "", "",
       "detach even while a process holds the disk's file open; its later "
       "I/O fails with EIO"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

absl::StatusOr<std::unique_ptr<fuse::Disk>> OpenAttachedDisk(
    const AttachContext& context, const std::vector<std::string>& words,
    const std::vector<const fuse::Disk*>& attached) {
  PVDISK_ASSIGN_OR_RETURN(ParsedArgs parsed,
                          ParseArgs("attach", AttachFlags(), words));
  if (!parsed.positional.empty() || !parsed.Has("disk") ||
      parsed.values.at("disk").size() != 1) {
    return absl::InvalidArgumentError(
        "attach takes exactly one --disk PATH[,OPTION...] and transport "
        "flags");
  }
  PVDISK_ASSIGN_OR_RETURN(fuse::DiskSpec spec,
                          ParseDiskArg(parsed.values.at("disk")[0]));
  PVDISK_ASSIGN_OR_RETURN(fuse::CheckedDisks checked,
                          fuse::CheckDiskList({spec}, context.mountpoint));
  for (const fuse::Disk* disk : attached) {
    if (disk->name() == checked.names[0]) {
      return absl::AlreadyExistsError(absl::StrCat(
          "the mount already has a disk named ", checked.names[0],
          " (detach it first, or attach an image of another name)"));
    }
  }
  fuse::DiskOptions options = context.options;
  const bool mount_inline =
      options.transport.placement == transport::Placement::kInline;
  bool flags_given = false;
  std::map<std::string, std::string, std::less<>> flags = context.mount_flags;
  for (const char* name : kTransportFlags) {
    if (parsed.Has(name)) {
      flags[name] = parsed.Get(name, "");
      flags_given = true;
    }
  }
  if (mount_inline || flags_given) {
    // The transport as the flags set it runs on backend threads.
    PVDISK_ASSIGN_OR_RETURN(
        transport::TransportOptions transport,
        transport::TransportOptionsFromFlags(FlagValues(flags)));
    transport.queue.lent = options.transport.queue.lent;
    options.transport = transport;
    if (!fuse::PayloadsInPlace(options)) options.transport.queue.lent = {};
  }
  const bool uring = options.engine == io::EngineKind::kUring;
  uint64_t in_use = 0;
  for (const fuse::Disk* disk : attached) {
    in_use +=
        transport::TransportMemoryOf(disk->transport_options(), uring).total();
  }
  const uint64_t needs =
      transport::TransportMemoryOf(options.transport, uring).total();
  if (in_use + needs > context.memory_budget) {
    return absl::ResourceExhaustedError(
        absl::StrCat("--disk ", spec.arg, ": its rings and data pages need ",
                     needs, " bytes, and the mount's disks hold ", in_use,
                     " of its --max-memory ", context.memory_budget,
                     " bytes; give fewer --queues, a smaller --ring-size or "
                     "--max-segments, or detach a disk"));
  }
  return fuse::Disk::Open(checked.disks[0], checked.names[0], options);
}

int RunAttach(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("attach", AttachFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("attach");
    return kExitOk;
  }
  if (parsed->positional.size() != 1 || !parsed->Has("disk") ||
      parsed->values.at("disk").size() != 1) {
    PrintError(
        "pvdisk attach takes MOUNTPOINT and one --disk PATH[,OPTION...] "
        "(see pvdisk attach --help)");
    return kExitUsage;
  }
  const std::string& mountpoint = parsed->positional[0];
  if (absl::StatusOr<MountEntry> mount = RequirePvdiskMount(mountpoint);
      !mount.ok()) {
    PrintError(std::string(mount.status().message()));
    return kExitUsage;
  }
  const std::string arg = parsed->values.at("disk")[0];
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg(arg);
  absl::StatusOr<fuse::CheckedDisks> checked =
      spec.ok() ? fuse::CheckDiskList({*spec}, mountpoint)
                : absl::StatusOr<fuse::CheckedDisks>(spec.status());
  if (!checked.ok()) {
    PrintError(std::string(checked.status().message()));
    return kExitUsage;
  }
  fuse::ControlRequest request;
  request.command = fuse::ControlRequest::Command::kAttach;
  request.words = {"--disk", AbsoluteDiskArg(arg, checked->disks[0])};
  for (const auto& [name, values] : parsed->values) {
    if (name == "disk") continue;
    request.words.push_back(absl::StrCat("--", name));
    request.words.push_back(values.back());
  }
  const int code = SendControl(mountpoint, request);
  if (code == kExitOk) {
    std::printf("pvdisk: attached %s at %s/%s\n", arg.c_str(),
                mountpoint.c_str(), checked->names[0].c_str());
  }
  return code;
}

int RunDetach(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("detach", DetachFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("detach");
    return kExitOk;
  }
  if (parsed->positional.size() != 2) {
    PrintError(absl::StrCat("pvdisk detach takes MOUNTPOINT and DISK, got ",
                            parsed->positional.size(),
                            " argument(s) (see pvdisk detach --help)"));
    return kExitUsage;
  }
  const std::string& mountpoint = parsed->positional[0];
  if (absl::StatusOr<MountEntry> mount = RequirePvdiskMount(mountpoint);
      !mount.ok()) {
    PrintError(std::string(mount.status().message()));
    return kExitUsage;
  }
  fuse::ControlRequest request;
  request.command = fuse::ControlRequest::Command::kDetach;
  request.disk = parsed->positional[1];
  request.force = parsed->Has("force");
  return SendControl(mountpoint, request);
}

}  // namespace pvdisk::cli
