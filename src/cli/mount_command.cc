// pvdisk mount MOUNTPOINT --disk IMAGE [--disk IMAGE ...] [--ring-size N]
//              [--engine uring|sync|null] [--allow-other] [--max-memory SIZE]
//              [--foreground]
//
// Everything a user can get wrong is checked before anything is created or
// mounted. Without --foreground the command forks a daemon and returns once
// the mount is ready, or with the daemon's error if it could not get there.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/event_log.h"
#include "base/log.h"
#include "base/size.h"
#include "base/status_macros.h"
#include "cli/args.h"
#include "cli/attach.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/disk_arg.h"
#include "cli/fuse_conf.h"
#include "cli/log_option.h"
#include "cli/mount_flags.h"
#include "cli/mountpoint_check.h"
#include "cli/placement.h"
#include "cli/placement_flags.h"
#include "cli/service_notify.h"
#include "fuse/channel/payload_arena.h"
#include "fuse/channel/uring_support.h"
#include "fuse/disk.h"
#include "fuse/disk_list_check.h"
#include "fuse/disk_options_check.h"
#include "fuse/filesystem.h"
#include "fuse/fuse_channel_options.h"
#include "fuse/protocol/session.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/header.h"
#include "io/engine_factory.h"
#include "transport/transport.h"
#include "transport/transport_flags.h"

namespace pvdisk::cli {
namespace {

struct MountConfig {
  std::string mountpoint;             // absolute
  std::vector<fuse::DiskSpec> disks;  // paths absolute
  std::vector<std::string> names;     // file names in the mount
  fuse::DiskOptions options;
  fuse::FuseChannelOptions channel;  // fuse_io resolved for this kernel
  std::string fuse_io_note;          // how auto resolved, for the message
  bool allow_other = false;
  bool foreground = false;
  LogChoice log;
  // For pvdisk attach: the flags as given and --max-memory.
  std::map<std::string, std::string, std::less<>> flags;
  uint64_t memory_budget = 0;
};

}  // namespace

const std::vector<FlagSpec>& MountFlags() {
  static const std::vector<FlagSpec> specs = {
      {"disk", true, true, "PATH[,OPTION...]", "",
       "an image to serve: a raw or qcow2 file (served with its backing "
       "chain), or rbd:POOL/IMAGE, an RBD image served through librbd; the "
       "options are listed under --disk options"},
      {"frontend", true, false, "blkif|virtio|virtio-packed|nvme", "blkif",
       "the ring protocol: Xen blkif, virtio-blk on a split virtqueue "
       "(virtio) or a packed one (virtio-packed), or NVMe queue pairs "
       "(nvme)"},
      {"ring-size", true, false, "N", absl::StrCat(transport::kDefaultRingSize),
       absl::StrCat("ring entries per queue, a power of two from ",
                    transport::kMinRingSize,
                    " to 4096 (blkif) or 32768 (virtio, virtio-packed)")},
      {"engine", true, false, "uring|sync|null", "uring",
       "how the backend does I/O: io_uring, pread/pwrite, or no I/O at all"},
      {"queues", true, false, "N", absl::StrCat(transport::kDefaultQueues),
       absl::StrCat("queues per disk, each with its own ring, data pages, "
                    "notifications and stats row: 1 to ",
                    transport::kMaxQueues)},
      {"queue-map", true, false, "offset|thread|round-robin|cpu", "offset",
       "which queue a request goes to: by 1 MiB stripe of the disk, by "
       "submitting thread, the next queue each time, or by the CPU the "
       "request arrives on (always cpu with --placement inline)"},
      {"backend-threads", true, false, "M", "1",
       "backend threads per disk, each serving queues q with q % M == its "
       "index through one io_uring"},
      {"max-segments", true, false, "S",
       absl::StrCat(transport::kDefaultSegments),
       absl::StrCat("4 KiB pages per ring request: 11 = direct requests only, "
                    "up to ",
                    transport::kMaxSegments, " with indirect segment pages")},
      {"persistent", true, false, "on|off", "on",
       "persistent grants: data pages mapped and registered with io_uring "
       "once (on), or mapped and unmapped for every request (off)"},
      {"notify", true, false, "event-idx|always", "event-idx",
       "notify the peer only when it asked (event index), or on every push"},
      {"nvme-data", true, false, "prp|sgl", "prp",
       "--frontend nvme: describe a command's data by PRP entries (a list "
       "beyond two pages) or by SGL descriptors (segments beyond one)"},
      {"irq-coalesce", true, false, "THRESHOLD,TIME_US", "off",
       "--frontend nvme: the backend interrupts once THRESHOLD responses "
       "are pending or TIME_US after the first (NVMe feature 08h)"},
      {"irq", true, false, "inline|thread", "inline",
       "where the frontend takes the backend's interrupts: on the backend "
       "thread right after it publishes responses, or on a completion "
       "thread per queue woken through an eventfd"},
      {"backend", true, false, "thread|process", "thread",
       "where each disk's backend runs: threads in the daemon, or a process "
       "of its own that shares only the rings, data pages and eventfds and "
       "is restarted, with nothing lost, when it dies (implies --irq thread)"},
      {"backend-restart-limit", true, false, "N",
       absl::StrCat(transport::process::kDefaultRestartLimit),
       "--backend process: how often a disk's backend may die within a "
       "minute and be restarted; one more death fails the disk's I/O with "
       "EIO"},
      {"shutdown-timeout", true, false, "SECONDS",
       absl::StrCat(fuse::kDefaultShutdownTimeoutSeconds),
       absl::StrCat(
           "how long unmount (or SIGTERM/SIGINT) waits for I/O in flight; "
           "what a hung image or backend has not answered by then fails "
           "with EIO, a backend process is killed, the daemon logs one line "
           "naming what was abandoned (on its stderr with --foreground) and "
           "exits: ",
           fuse::kMinShutdownTimeoutSeconds, " to ",
           fuse::kMaxShutdownTimeoutSeconds)},
      {"merge", true, false, "on|off", "on",
       "merge adjacent requests of the same direction in each queue's "
       "staging queue"},
      {"dispatch", true, false, "when-room|always", "when-room",
       "move staged requests to the ring only into free slots (they can "
       "merge while the ring is full), or all at once onto a list where "
       "nothing merges"},
      {"plug-us", true, false, "U", "0",
       "hold staged requests up to U microseconds even when the ring has "
       "room, so that a burst can merge"},
      {"poll-us", true, false, "U", absl::StrCat(transport::kDefaultPollUs),
       "spin up to U microseconds for new work before sleeping while "
       "requests come one at a time (average depth below 2); a spin for an "
       "I/O's completion lasts as long as lone completions lately took, up "
       "to 200 or U; 0 never spins"},
      {"engine-max-inflight", true, false, "K", "none",
       "cap the I/Os in flight at each backend's engine (e.g. 128, the old "
       "linux-aio limit)"},
      {"fuse-threads", true, false, "N",
       absl::StrCat(fuse::kDefaultFuseThreads),
       absl::StrCat("FUSE worker threads reading requests from /dev/fuse: 1 "
                    "to ",
                    fuse::kMaxFuseThreads)},
      {"fuse-io", true, false, "auto|uring|classic", "auto",
       "how FUSE requests arrive: through io_uring, one queue per CPU "
       "(kernel 6.14+), or by read()/write() on /dev/fuse; auto takes uring "
       "where the kernel offers it (as root it switches the fuse module's "
       "enable_uring on) and classic elsewhere"},
      {"fuse-queue-depth", true, false, "N",
       absl::StrCat(fuse::channel::kDefaultUringQueueDepth),
       absl::StrCat("FUSE requests each uring queue holds at once: 1 to ",
                    fuse::channel::kMaxUringQueueDepth)},
      {"fuse-huge-entries", true, false, "N",
       absl::StrCat(fuse::channel::kDefaultHugeEntries),
       "entries of each FUSE uring queue (the ones the kernel hands out "
       "first) whose payloads are in transparent huge pages, so that a large "
       "request reaches the disk in few segments; each costs up to 1 MiB of "
       "memory once used; as many more are made huge when they first carry a "
       "request over 64 KiB; 0 to --fuse-queue-depth"},
      {"fuse-spread", true, false, "on|off", "on",
       "with --placement inline: a FUSE uring queue thread that holds 2 or "
       "more requests weighing 16 in all (1 each, plus 1 per whole 4 KiB of "
       "data a request brings: 16 reads, 8 writes of 4 KiB, or 2 writes of "
       "28 KiB and up) hands every other reply to another queue thread, "
       "which commits it and so takes that entry's later requests (one "
       "submitter's depth then runs on every CPU); an entry goes home again "
       "when it comes alone"},
      {"fuse-queue-pin", true, false, "auto|on|off", "auto",
       "where each FUSE uring queue's thread runs: on = on its CPU (the CPU "
       "its requests come from), off = where the scheduler puts it, auto = "
       "on its CPU while requests come one at a time, on the other CPUs "
       "while they come several at once"},
      {"placement", true, false, "auto|inline|backend-thread", "auto",
       "where each queue's backend runs: inline = on the thread of the FUSE "
       "uring queue its requests arrive on, sharing its io_uring (one queue "
       "per CPU, no thread hand-offs); backend-thread = on backend threads "
       "of its own (--backend-threads); auto = inline with --fuse-io uring "
       "unless a queue flag asks for what only backend threads do"},
      {"allow-other", false, false, "", "",
       "let users other than the one mounting reach the mount; the kernel "
       "still checks each file's owner and mode (those of its image)"},
      {"max-memory", true, false, "SIZE", "a quarter of RAM",
       "refuse a configuration whose shared rings, data pages and io_uring "
       "rings would take more than SIZE (e.g. 2G)"},
      {"foreground", false, false, "", "",
       "serve in this process until unmounted or interrupted"},
      {"log", true, false, "FILE|syslog", "RUNTIME_DIR/MOUNTPOINT.log",
       "where the daemon writes its warnings and errors (restarts, broken "
       "rings, invalid requests, refused writes, I/O errors: one line each "
       "with time, disk, queue and cause, rate-limited): a file it appends "
       "to, or syslog; without it a daemon writes to a file named after the "
       "mountpoint in $XDG_RUNTIME_DIR/pvdisk (else /run/user/UID/pvdisk, "
       "else /tmp/pvdisk-UID), and a --foreground mount to its stderr"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

namespace {
// Parses the command line and hands each part to the library that owns it
// for its checks; fills `config`. The order is the user's: the mountpoint,
// the disks, then the flags.
absl::Status CheckMount(const ParsedArgs& parsed, MountConfig* config) {
  if (parsed.positional.size() != 1) {
    return absl::InvalidArgumentError(
        "mount takes exactly one MOUNTPOINT (usage: pvdisk mount MOUNTPOINT "
        "--disk IMAGE [--disk IMAGE ...])");
  }
  PVDISK_ASSIGN_OR_RETURN(config->mountpoint,
                          CheckMountpoint(parsed.positional[0]));
  if (!parsed.Has("disk")) {
    return absl::InvalidArgumentError(
        "mount needs at least one --disk IMAGE (make one with 'pvdisk create "
        "IMAGE --size 1G')");
  }
  std::vector<fuse::DiskSpec> specs;
  for (const std::string& text : parsed.values.at("disk")) {
    PVDISK_ASSIGN_OR_RETURN(fuse::DiskSpec spec, ParseDiskArg(text));
    specs.push_back(std::move(spec));
  }
  PVDISK_ASSIGN_OR_RETURN(
      fuse::CheckedDisks disks,
      fuse::CheckDiskList(std::move(specs), config->mountpoint));
  config->disks = std::move(disks.disks);
  config->names = std::move(disks.names);

  const FlagValues flags = parsed.Flags();
  PVDISK_ASSIGN_OR_RETURN(transport::TransportOptions transport,
                          transport::TransportOptionsFromFlags(flags));
  PVDISK_ASSIGN_OR_RETURN(
      config->options,
      fuse::DiskOptionsFromFlags(flags, transport, config->disks));
  PVDISK_ASSIGN_OR_RETURN(
      fuse::FuseChannelRequest channel,
      fuse::FuseChannelFromFlags(
          flags, fuse::PayloadsInPlace(config->options),
          fuse::ChannelDefaultsFor(config->disks,
                                   config->options.transport.queue.ring_size)));
  config->channel = channel.options;

  PlacementInput placement;
  PVDISK_RETURN_IF_ERROR(ReadPlacementFlags(flags, &placement));
  config->memory_budget = placement.memory_budget;
  for (const auto& [name, given] : parsed.values) {
    if (!given.empty()) config->flags[name] = given.back();
  }
  // Resolved before the daemon forks, so that the mount message can say
  // what happened and `uring` on a kernel without it fails before anything
  // runs.
  placement.fuse_io_asked = config->channel.fuse_io;
  PVDISK_ASSIGN_OR_RETURN(config->channel.fuse_io,
                          fuse::channel::ResolveFuseIo(config->channel.fuse_io,
                                                       &config->fuse_io_note));
  placement.fuse_io = config->channel.fuse_io;
  placement.cpus = fuse::channel::PossibleCpus();
  placement.against_inline =
      FlagAgainstInline(parsed, transport, placement.cpus);
  placement.transport = transport;
  placement.uring_engine = config->options.engine == io::EngineKind::kUring;
  placement.disks = static_cast<uint32_t>(config->disks.size());
  PVDISK_ASSIGN_OR_RETURN(config->options.transport,
                          DecidePlacement(placement));
  const transport::Placement decided = config->options.transport.placement;
  PVDISK_RETURN_IF_ERROR(
      fuse::CheckFuseSpread(config->channel, channel.given, decided));
  config->channel.spread =
      fuse::SpreadApplies(config->channel, decided, placement.cpus);

  config->allow_other = parsed.Has("allow-other");
  PVDISK_RETURN_IF_ERROR(CheckAllowOther(config->allow_other, geteuid() == 0));
  config->foreground = parsed.Has("foreground");
  PVDISK_ASSIGN_OR_RETURN(config->log,
                          CheckLogFlag(parsed.Get("log", ""), parsed.Has("log"),
                                       config->foreground, config->mountpoint));
  // A daemon detaches from the terminal once mounted; its backend processes
  // must not keep the terminal (or the caller's pipe) open either. A
  // daemon's log file is its stderr, which they share.
  config->options.backend_keeps_stderr =
      config->foreground || config->log.kind == LogChoice::Kind::kFile;
  return absl::OkStatus();
}

// Tells the waiting parent how the daemon's start went: "ok", or an exit
// code and a message. No-op in the foreground (fd -1).
void Report(int fd, int code, const std::string& message) {
  if (fd < 0) return;
  std::string line =
      code == 0 ? "ok\n" : absl::StrCat(code, " ", message, "\n");
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

// Points stdin and stdout at /dev/null, and stderr too unless it is the
// daemon's log file.
void DetachFromTerminal() {
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd < 0) return;
  dup2(null_fd, STDIN_FILENO);
  dup2(null_fd, STDOUT_FILENO);
  if (CurrentLogTarget() != LogTarget::kFile) dup2(null_fd, STDERR_FILENO);
  if (null_fd > STDERR_FILENO) close(null_fd);
}

// Opens the disks, mounts and serves until unmounted. `ready_fd` is the
// pipe to the waiting parent, or -1 in the foreground.
int Serve(const MountConfig& config, int ready_fd) {
  // On the uring channel, the entries' payload buffers go in one arena that
  // every disk's queues may grant to their backends (no copy between FUSE
  // and the ring), where a backend can reach it: in this process, with
  // persistent grants. Declared first: it outlives the disks.
  fuse::DiskOptions options = config.options;
  fuse::FuseChannelOptions channel = config.channel;
  std::unique_ptr<fuse::channel::PayloadArena> arena;
  if (channel.fuse_io == fuse::channel::FuseIo::kUring &&
      fuse::PayloadsInPlace(options)) {
    absl::StatusOr<std::unique_ptr<fuse::channel::PayloadArena>> made =
        fuse::channel::PayloadArena::Create(
            fuse::channel::PossibleCpus(), channel.queue_depth,
            fuse::protocol::kMaxWrite, channel.huge_entries);
    if (made.ok()) {
      arena = std::move(*made);
      options.transport.queue.lent = arena->lent();
      channel.arena = arena.get();
      if (!arena->huge_note().empty()) {
        LogInfo("FUSE payloads stay in 4 KiB pages: %s",
                arena->huge_note().c_str());
      }
    } else {
      LogInfo("FUSE payloads are copied into the rings: %s",
              std::string(made.status().message()).c_str());
    }
  }
  options.fuse_channel = channel;
  std::vector<std::unique_ptr<fuse::Disk>> disks;
  for (size_t i = 0; i < config.disks.size(); ++i) {
    absl::StatusOr<std::unique_ptr<fuse::Disk>> disk =
        fuse::Disk::Open(config.disks[i], config.names[i], options);
    if (!disk.ok()) {
      std::string message(disk.status().message());
      if (ready_fd < 0) PrintError(message);
      Report(ready_fd, kExitUsage, message);
      return kExitUsage;
    }
    disks.push_back(std::move(*disk));
  }
  for (auto& disk : disks) disk->Start();
  // The filesystem owns the disks from here on, and keeps them until the
  // mount ends: the serving callback below may name them.
  std::vector<fuse::Disk*> opened;
  for (auto& disk : disks) opened.push_back(disk.get());
  AttachContext attach;
  attach.mountpoint = config.mountpoint;
  attach.options = options;
  attach.mount_flags = config.flags;
  attach.memory_budget = config.memory_budget;
  fuse::Filesystem filesystem(
      std::move(disks), config.allow_other, channel,
      [attach](const std::vector<std::string>& words,
               const std::vector<const fuse::Disk*>& attached) {
        return OpenAttachedDisk(attach, words, attached);
      });
  bool mounted = false;
  absl::Status served = filesystem.MountAndServe(config.mountpoint, [&] {
    mounted = true;
    for (fuse::Disk* disk : opened) disk->Serving();
    // Under systemd (Type=notify): the mount serves now.
    if (absl::Status told = NotifyServiceManager(absl::StrCat(
            "READY=1\nMAINPID=", getpid(), "\nSTATUS=serving ",
            config.disks.size(), " disk(s) at ", config.mountpoint));
        !told.ok()) {
      LogInfo("%s", std::string(told.message()).c_str());
    }
    if (ready_fd >= 0) {
      LogInfo("serving %zu disk(s) at %s", config.disks.size(),
              config.mountpoint.c_str());
      Report(ready_fd, 0, "");
      DetachFromTerminal();
    } else {
      std::printf(
          "pvdisk: serving %zu disk(s) at %s; stop with Ctrl-C or "
          "'pvdisk unmount %s'\n",
          config.disks.size(), config.mountpoint.c_str(),
          config.mountpoint.c_str());
      std::fflush(stdout);
    }
  });
  FlushEventLog();
  if (filesystem.abandoned_io()) {
    // The mount is gone, but an engine may still write into the disks'
    // pages and the payload arena (Disk::Shutdown's contract): end here,
    // before anything of them is freed.
    std::fflush(nullptr);
    _exit(kExitFailure);
  }
  if (!served.ok()) {
    std::string message(served.message());
    if (!mounted) Report(ready_fd, kExitFailure, message);
    if (ready_fd < 0) {
      PrintError(message);
    } else if (mounted) {
      LogInfo("%s", message);  // the caller is gone: to the daemon's log
    }
    return kExitFailure;
  }
  return kExitOk;
}

// The size the disk at `path` shows in the mount, for the mount message: a
// qcow2 image's virtual size (unless format=raw), else the file's size; 0
// if it cannot be read (the mount itself has opened it by then).
uint64_t DiskSize(const std::string& path, image::ImageFormat format) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (format == image::ImageFormat::kRaw) return file_size;
  // The header, its extensions and the backing file's name lie in the
  // first cluster; 64 KiB holds them for every image pvdisk or QEMU makes.
  std::vector<uint8_t> first(std::min<uint64_t>(file_size, 64 * 1024));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return file_size;
  const ssize_t got = pread(fd, first.data(), first.size(), 0);
  close(fd);
  if (got < 4 ||
      image::qcow2::LoadBe32(first.data()) != image::qcow2::kQcow2Magic) {
    return file_size;
  }
  first.resize(static_cast<size_t>(got));
  absl::StatusOr<image::qcow2::Qcow2Header> header =
      image::qcow2::ParseQcow2Header(first, path);
  return header.ok() ? header->size : file_size;
}

std::string Describe(const MountConfig& config) {
  std::string files;
  for (size_t i = 0; i < config.names.size(); ++i) {
    if (config.disks[i].rbd) {
      absl::StrAppend(&files, config.names[i], " (",
                      config.disks[i].rbd->Name(), "), ");
      continue;
    }
    const uint64_t size =
        DiskSize(config.disks[i].path, config.disks[i].format);
    absl::StrAppend(&files, config.names[i], " (", FormatSize(size), "), ");
  }
  return absl::StrCat(files, "stats, stats.json, metrics");
}

}  // namespace

int RunMount(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("mount", MountFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("mount");
    return kExitOk;
  }
  MountConfig config;
  if (absl::Status checked = CheckMount(*parsed, &config); !checked.ok()) {
    PrintError(std::string(checked.message()));
    return kExitUsage;
  }
  if (!config.fuse_io_note.empty()) {
    std::printf("pvdisk: %s\n", config.fuse_io_note.c_str());
  }
  int log_fd = -1;
  if (config.log.kind == LogChoice::Kind::kFile) {
    absl::StatusOr<int> opened = OpenLog(config.log.path);
    if (!opened.ok()) {
      PrintError(std::string(opened.status().message()));
      return kExitUsage;
    }
    log_fd = *opened;
  }
  if (config.foreground) {
    // The terminal keeps the command's own messages; the daemon's log
    // lines go where --log says.
    if (log_fd >= 0) SetLogTarget(LogTarget::kFile, log_fd);
    if (config.log.kind == LogChoice::Kind::kSyslog) {
      SetLogTarget(LogTarget::kSyslog);
    }
    return Serve(config, -1);
  }

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    PrintError(absl::StrCat("pipe: ", strerror(errno)));
    return kExitFailure;
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    PrintError(absl::StrCat("fork: ", strerror(errno)));
    return kExitFailure;
  }
  if (pid == 0) {
    close(pipe_fds[0]);
    // The log from the start: a log file becomes stderr, which the backend
    // processes inherit; the caller's terminal or pipe is let go.
    if (log_fd >= 0) {
      dup2(log_fd, STDERR_FILENO);
      close(log_fd);
      SetLogTarget(LogTarget::kFile, STDERR_FILENO);
    } else if (config.log.kind == LogChoice::Kind::kSyslog) {
      SetLogTarget(LogTarget::kSyslog);
    }
    setsid();
    if (chdir("/") != 0) {
      // Paths are absolute already; staying put only keeps a directory busy.
    }
    _exit(Serve(config, pipe_fds[1]));
  }
  close(pipe_fds[1]);
  if (log_fd >= 0) close(log_fd);
  std::string answer;
  char buffer[512];
  ssize_t got;
  while ((got = read(pipe_fds[0], buffer, sizeof(buffer))) > 0 ||
         (got < 0 && errno == EINTR)) {
    if (got > 0) answer.append(buffer, got);
  }
  close(pipe_fds[0]);
  if (answer == "ok\n") {
    std::printf("pvdisk: mounted %s at %s (daemon pid %d, log %s)\n",
                Describe(config).c_str(), config.mountpoint.c_str(), pid,
                LogName(config.log).c_str());
    return kExitOk;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (answer.empty()) {
    PrintError("the daemon exited before the mount was ready");
    return kExitFailure;
  }
  int code = kExitFailure;
  size_t space = answer.find(' ');
  (void)absl::SimpleAtoi(answer.substr(0, space), &code);
  std::string message = answer.substr(space + 1);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  PrintError(message);
  return code;
}

}  // namespace pvdisk::cli
