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

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/size.h"
#include "base/status_macros.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/disk_arg.h"
#include "cli/fuse_conf.h"
#include "cli/mount_flags.h"
#include "cli/mount_table.h"
#include "cli/placement.h"
#include "fuse/channel/payload_arena.h"
#include "fuse/channel/queue_affinity.h"
#include "fuse/channel/uring_channel.h"
#include "fuse/channel/uring_support.h"
#include "fuse/disk.h"
#include "fuse/disk_options_check.h"
#include "fuse/filesystem.h"
#include "fuse/protocol/session.h"
#include "image/open_image.h"
#include "io/engine_factory.h"
#include "transport/memory_budget.h"
#include "transport/transport.h"

namespace pvdisk::cli {
namespace {

constexpr uint32_t kDefaultQueues = 2;

struct MountConfig {
  std::string mountpoint;             // absolute
  std::vector<fuse::DiskSpec> disks;  // paths absolute
  std::vector<std::string> names;     // file names in the mount
  fuse::DiskOptions options;
  unsigned fuse_threads = fuse::kDefaultFuseThreads;
  fuse::FuseChannelOptions channel;  // fuse_io resolved for this kernel
  std::string fuse_io_note;          // how auto resolved, for the message
  bool allow_other = false;
  bool foreground = false;
};

}  // namespace

const std::vector<FlagSpec>& MountFlags() {
  static const std::vector<FlagSpec> specs = {
      {"disk", true, true, "PATH[,ro][,lock=off][,size=SIZE][,eio=SECTOR[+N]]",
       "",
       "an image to serve; ro = read-only, lock=off = take no image lock "
       "(by default a read-write disk refuses an image another pvdisk or "
       "QEMU uses), size = expected size, eio = fail I/O on those 512-byte "
       "sectors (fault injection); "
       "delay=US[,delay-write=US] = hold each completion US microseconds "
       "after submission (writes: delay-write), on any engine: a device "
       "latency model. Or "
       "rbd:POOL/IMAGE[,conf=PATH][,id=CLIENT][,timeout=SECONDS]: an RBD "
       "image served through librbd (conf = the cluster's ceph.conf, id = "
       "the client name, timeout = how long the cluster may stay silent, "
       "at mount, per I/O and at unmount, default 15 s)"},
      {"frontend", true, false, "blkif|virtio|virtio-packed", "blkif",
       "the ring protocol: Xen blkif, or virtio-blk on a split virtqueue "
       "(virtio) or a packed one (virtio-packed)"},
      {"ring-size", true, false, "N", absl::StrCat(transport::kDefaultRingSize),
       absl::StrCat("ring entries per queue, a power of two from ",
                    transport::kMinRingSize,
                    " to 4096 (blkif) or 32768 (virtio, virtio-packed)")},
      {"engine", true, false, "uring|sync|null", "uring",
       "how the backend does I/O: io_uring, pread/pwrite, or no I/O at all"},
      {"queues", true, false, "N", absl::StrCat(kDefaultQueues),
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
       "backend spins up to U microseconds for new work before sleeping, "
       "while requests come one at a time (average depth below 2)"},
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
       "memory once used; 0 to --fuse-queue-depth"},
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
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

namespace {
// The checks of an rbd: disk that need no cluster: its conf= exists (and
// becomes absolute: the daemon changes to /), it is not given twice, its
// name is allowed. Returns the file name in the mount: the image's.
absl::StatusOr<std::string> CheckRbdDisk(const std::string& text,
                                         fuse::DiskSpec* spec,
                                         std::set<std::string>* seen) {
  io::RbdSpec& rbd = *spec->rbd;
  if (!rbd.conf.empty()) {
    char resolved[PATH_MAX];
    if (realpath(rbd.conf.c_str(), resolved) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disk ", text, ": Ceph configuration ", rbd.conf,
          errno == ENOENT
              ? " does not exist"
              : absl::StrCat(" cannot be resolved: ", strerror(errno))));
    }
    rbd.conf = resolved;
  }
  if (!seen->insert(absl::StrCat(rbd.Name(), "\n", rbd.conf)).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("--disk ", rbd.Name(),
                     " is given twice; each image may be served "
                     "once"));
  }
  if (rbd.image == "stats" || rbd.image == "stats.json") {
    return absl::InvalidArgumentError(absl::StrCat(
        "image ", rbd.Name(), " would be named '", rbd.image,
        "' in the mount, which is the stats file's name; rename the image"));
  }
  return rbd.image;
}

// Checks the command line and the things it names; fills `config`.
absl::Status CheckMount(const ParsedArgs& parsed, MountConfig* config) {
  if (parsed.positional.size() != 1) {
    return absl::InvalidArgumentError(
        "mount takes exactly one MOUNTPOINT (usage: pvdisk mount MOUNTPOINT "
        "--disk IMAGE [--disk IMAGE ...])");
  }
  const std::string& mountpoint = parsed.positional[0];
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) {
    // A dead FUSE mount answers ENOTCONN, or ECONNABORTED / ECANCELED while
    // the kernel is still tearing its connection (or its uring queues)
    // down (seen right after the daemon was killed).
    if (errno == ENOTCONN || errno == ECONNABORTED || errno == ECANCELED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mountpoint ", mountpoint,
          " is a FUSE mount whose daemon is gone; run 'fusermount3 -u ",
          mountpoint, "' first"));
    }
    return absl::InvalidArgumentError(
        errno == ENOENT
            ? absl::StrCat("mountpoint ", mountpoint, " does not exist")
            : absl::StrCat("mountpoint ", mountpoint,
                           " cannot be examined: ", strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mountpoint ", mountpoint, " is not a directory"));
  }
  std::optional<std::string> absolute = AbsoluteMountPath(mountpoint);
  if (!absolute) {
    return absl::InvalidArgumentError(
        absl::StrCat("mountpoint ", mountpoint, " cannot be resolved"));
  }
  if (std::optional<MountEntry> entry = FindMount(*absolute)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mountpoint ", mountpoint, " is already mounted (", entry->fs_type,
        " from ", entry->source, "); unmount it first"));
  }
  config->mountpoint = *absolute;

  if (!parsed.Has("disk")) {
    return absl::InvalidArgumentError(
        "mount needs at least one --disk IMAGE (make one with 'pvdisk create "
        "IMAGE --size 1G')");
  }
  std::set<std::string> seen_paths;
  std::set<std::string> seen_names;
  for (const std::string& text : parsed.values.at("disk")) {
    absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg(text);
    if (!spec.ok()) return spec.status();
    if (spec->rbd) {
      // The cluster itself is reached only by the daemon (librados does not
      // survive fork): Disk::Open reports what is wrong there.
      PVDISK_ASSIGN_OR_RETURN(std::string name,
                              CheckRbdDisk(text, &*spec, &seen_paths));
      if (!seen_names.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("two images would both be named '", name,
                         "' in the mount; serve one of them per mount"));
      }
      config->disks.push_back(*spec);
      config->names.push_back(name);
      continue;
    }
    char resolved[PATH_MAX];
    if (realpath(spec->path.c_str(), resolved) == nullptr) {
      return absl::InvalidArgumentError(
          errno == ENOENT
              ? absl::StrCat("image ", spec->path, " does not exist")
              : absl::StrCat("image ", spec->path,
                             " cannot be resolved: ", strerror(errno)));
    }
    std::string path = resolved;
    if (path.rfind(config->mountpoint + "/", 0) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image ", spec->path,
          " lies inside the mountpoint; the daemon never touches its own "
          "mountpoint, so keep images outside it"));
    }
    if (!seen_paths.insert(path).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--disk ", spec->path,
                       " is given twice; each image may be served "
                       "once"));
    }
    std::string name = path.substr(path.rfind('/') + 1);
    if (name == "stats" || name == "stats.json") {
      return absl::InvalidArgumentError(absl::StrCat(
          "image ", spec->path, " would be named '", name,
          "' in the mount, which is the stats file's name; rename the image"));
    }
    if (!seen_names.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two images would both be named '", name,
                       "' in the mount; rename one of them"));
    }
    // Open once now (through the image layer, for the disk's virtual
    // size; no lock, no O_DIRECT), so that an unreadable or odd-sized image
    // is reported here, before anything is mounted.
    image::ImageSpec probe = fuse::ImageSpecOf(*spec, io::EngineKind::kNull);
    probe.path = path;
    probe.lock = false;
    absl::StatusOr<std::shared_ptr<image::Image>> image =
        image::OpenImage(probe);
    if (!image.ok()) return image.status();
    PVDISK_RETURN_IF_ERROR(fuse::CheckDiskSpec(*spec, (*image)->size_bytes()));
    spec->path = path;
    config->disks.push_back(*spec);
    config->names.push_back(name);
  }

  transport::TransportOptions& transport = config->options.transport;
  auto number = [&](const char* flag, uint64_t fallback, uint64_t min,
                    uint64_t max) {
    return ParseNumber(flag, parsed.Get(flag, absl::StrCat(fallback)), min,
                       max);
  };
  PVDISK_ASSIGN_OR_RETURN(transport.queue.protocol,
                          transport::FindProtocol(std::string_view(
                              parsed.Get("frontend", "blkif"))));
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t ring_size,
      number("ring-size", transport::kDefaultRingSize, transport::kMinRingSize,
             transport.queue.protocol->max_ring_size()));
  transport.queue.ring_size = static_cast<uint32_t>(ring_size);
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t max_segments,
      number("max-segments", transport::kDefaultSegments,
             transport::kMinSegments, transport::kMaxSegments));
  transport.queue.max_segments = static_cast<uint32_t>(max_segments);
  PVDISK_ASSIGN_OR_RETURN(uint64_t queues, number("queues", kDefaultQueues, 1,
                                                  transport::kMaxQueues));
  transport.queues = static_cast<uint32_t>(queues);
  PVDISK_ASSIGN_OR_RETURN(uint64_t threads,
                          number("backend-threads", 1, 1, transport.queues));
  transport.backend_threads = static_cast<uint32_t>(threads);
  PVDISK_ASSIGN_OR_RETURN(transport.queue_map,
                          transport::ParseQueueMap(std::string_view(
                              parsed.Get("queue-map", "offset"))));
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t poll_us,
      number("poll-us", transport::kDefaultPollUs, 0, 1000000));
  transport.backend.poll_us = static_cast<uint32_t>(poll_us);
  if (parsed.Has("engine-max-inflight")) {
    PVDISK_ASSIGN_OR_RETURN(uint64_t cap,
                            number("engine-max-inflight", 0, 1, 1u << 20));
    transport.backend.engine_max_inflight = static_cast<uint32_t>(cap);
  }
  // Two-way switches: each flag's value must be one of its two words; the
  // result is whether it is the first.
  auto first_of = [&](const char* flag, const char* first,
                      const char* second) -> absl::StatusOr<bool> {
    std::string value = parsed.Get(flag, first);
    if (value != first && value != second) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " '", value,
                                                     "' is not allowed: use ",
                                                     first, " or ", second));
    }
    return value == first;
  };
  PVDISK_ASSIGN_OR_RETURN(transport.queue.policy.merge,
                          first_of("merge", "on", "off"));
  PVDISK_ASSIGN_OR_RETURN(bool when_room,
                          first_of("dispatch", "when-room", "always"));
  transport.queue.policy.dispatch = when_room
                                        ? transport::DispatchMode::kWhenRoom
                                        : transport::DispatchMode::kAlways;
  PVDISK_ASSIGN_OR_RETURN(uint64_t plug_us, number("plug-us", 0, 0, 100000));
  transport.queue.policy.plug_us = static_cast<uint32_t>(plug_us);
  PVDISK_ASSIGN_OR_RETURN(transport.queue.persistent,
                          first_of("persistent", "on", "off"));
  PVDISK_ASSIGN_OR_RETURN(bool event_idx,
                          first_of("notify", "event-idx", "always"));
  transport.queue.notify = event_idx ? transport::NotifyMode::kEventIdx
                                     : transport::NotifyMode::kAlways;
  PVDISK_ASSIGN_OR_RETURN(transport.queue.irq,
                          transport::ParseInterruptMode(
                              std::string_view(parsed.Get("irq", "inline"))));
  PVDISK_ASSIGN_OR_RETURN(bool backend_thread,
                          first_of("backend", "thread", "process"));
  config->options.backend =
      backend_thread ? fuse::BackendMode::kThread : fuse::BackendMode::kProcess;
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t restart_limit,
      number("backend-restart-limit", transport::process::kDefaultRestartLimit,
             0, 1000));
  config->options.backend_restart_limit = static_cast<uint32_t>(restart_limit);
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t shutdown_timeout,
      number("shutdown-timeout", fuse::kDefaultShutdownTimeoutSeconds,
             fuse::kMinShutdownTimeoutSeconds,
             fuse::kMaxShutdownTimeoutSeconds));
  config->options.shutdown_timeout_seconds =
      static_cast<uint32_t>(shutdown_timeout);
  PVDISK_RETURN_IF_ERROR(transport::ValidateTransportOptions(transport));
  absl::StatusOr<io::EngineKind> engine =
      io::ParseEngineKind(parsed.Get("engine", "uring"));
  if (!engine.ok()) return engine.status();
  config->options.engine = *engine;
  fuse::DiskOptionFlags disk_flags;
  disk_flags.irq = parsed.Has("irq");
  disk_flags.backend_restart_limit = parsed.Has("backend-restart-limit");
  PVDISK_RETURN_IF_ERROR(
      fuse::CheckDiskOptions(config->options, disk_flags, config->disks));
  PVDISK_ASSIGN_OR_RETURN(uint64_t fuse_threads,
                          number("fuse-threads", fuse::kDefaultFuseThreads, 1,
                                 fuse::kMaxFuseThreads));
  config->fuse_threads = static_cast<unsigned>(fuse_threads);
  PVDISK_ASSIGN_OR_RETURN(
      config->channel.fuse_io,
      fuse::channel::ParseFuseIo(parsed.Get("fuse-io", "auto")));
  PVDISK_ASSIGN_OR_RETURN(
      uint64_t queue_depth,
      number("fuse-queue-depth", fuse::channel::kDefaultUringQueueDepth, 1,
             fuse::channel::kMaxUringQueueDepth));
  config->channel.queue_depth = static_cast<uint32_t>(queue_depth);
  PVDISK_ASSIGN_OR_RETURN(uint64_t huge_entries,
                          number("fuse-huge-entries",
                                 std::min(fuse::channel::kDefaultHugeEntries,
                                          config->channel.queue_depth),
                                 0, fuse::channel::kMaxUringQueueDepth));
  config->channel.huge_entries = static_cast<uint32_t>(huge_entries);
  PVDISK_ASSIGN_OR_RETURN(
      config->channel.queue_pin,
      fuse::channel::ParseQueuePin(parsed.Get("fuse-queue-pin", "auto")));
  PVDISK_ASSIGN_OR_RETURN(config->channel.spread,
                          first_of("fuse-spread", "on", "off"));
  fuse::FuseChannelFlags channel_flags;
  channel_flags.fuse_threads = parsed.Has("fuse-threads");
  channel_flags.queue_depth = parsed.Has("fuse-queue-depth");
  channel_flags.queue_pin = parsed.Has("fuse-queue-pin");
  channel_flags.huge_entries = parsed.Has("fuse-huge-entries");
  channel_flags.spread = parsed.Has("fuse-spread");
  PVDISK_ASSIGN_OR_RETURN(
      config->channel.fuse_io,
      fuse::CheckFuseChannelOptions(
          config->channel, channel_flags,
          transport.queue.persistent &&
              config->options.backend == fuse::BackendMode::kThread));

  PlacementInput placement;
  PVDISK_ASSIGN_OR_RETURN(placement.wanted,
                          ParsePlacement(parsed.Get("placement", "auto")));
  placement.memory_budget = transport::DefaultMemoryBudget();
  if (parsed.Has("max-memory")) {
    absl::StatusOr<uint64_t> size = ParseSize(parsed.Get("max-memory", ""));
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-memory: ", size.status().message()));
    }
    placement.memory_budget = *size;
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
      FlagAgainstInline(parsed, config->disks, transport, placement.cpus);
  placement.transport = transport;
  placement.uring_engine = config->options.engine == io::EngineKind::kUring;
  placement.disks = static_cast<uint32_t>(config->disks.size());
  PVDISK_ASSIGN_OR_RETURN(transport, DecidePlacement(placement));
  PVDISK_RETURN_IF_ERROR(fuse::CheckFuseSpread(config->channel, channel_flags,
                                               transport.placement));

  config->allow_other = parsed.Has("allow-other");
  if (config->allow_other && geteuid() != 0 &&
      !FuseConfAllowsOther(kFuseConfPath)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--allow-other needs 'user_allow_other' in ", kFuseConfPath,
        " when not run as root (ask an administrator to add that line), or "
        "mount without --allow-other so that only you reach the mount"));
  }
  config->foreground = parsed.Has("foreground");
  // A daemon detaches from the terminal once mounted; its backend processes
  // must not keep the terminal (or the caller's pipe) open either.
  config->options.backend_keeps_stderr = config->foreground;
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

void DetachFromTerminal() {
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd < 0) return;
  dup2(null_fd, STDIN_FILENO);
  dup2(null_fd, STDOUT_FILENO);
  dup2(null_fd, STDERR_FILENO);
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
      options.backend == fuse::BackendMode::kThread &&
      options.transport.queue.persistent) {
    absl::StatusOr<std::unique_ptr<fuse::channel::PayloadArena>> made =
        fuse::channel::PayloadArena::Create(
            fuse::channel::PossibleCpus(), channel.queue_depth,
            fuse::protocol::kMaxWrite, channel.huge_entries);
    if (made.ok()) {
      arena = std::move(*made);
      options.transport.queue.lent = arena->lent();
      options.fuse_huge_entries = arena->huge_entries();
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
  fuse::Filesystem filesystem(std::move(disks), config.fuse_threads,
                              config.allow_other, channel);
  bool mounted = false;
  absl::Status served = filesystem.MountAndServe(config.mountpoint, [&] {
    mounted = true;
    if (ready_fd >= 0) {
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
    if (ready_fd < 0 || mounted) PrintError(message);
    return kExitFailure;
  }
  return kExitOk;
}

std::string Describe(const MountConfig& config) {
  std::string files;
  for (size_t i = 0; i < config.names.size(); ++i) {
    if (config.disks[i].rbd) {
      absl::StrAppend(&files, config.names[i], " (",
                      config.disks[i].rbd->Name(), "), ");
      continue;
    }
    struct stat st;
    uint64_t size =
        stat(config.disks[i].path.c_str(), &st) == 0 ? st.st_size : 0;
    absl::StrAppend(&files, config.names[i], " (", FormatSize(size), "), ");
  }
  return absl::StrCat(files, "stats, stats.json");
}

}  // namespace

int RunMount(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("mount", MountFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    std::printf(
        "usage: pvdisk mount MOUNTPOINT --disk IMAGE [--disk IMAGE ...] "
        "[flags]\n%s",
        FlagHelp(MountFlags()).c_str());
    return kExitOk;
  }
  MountConfig config;
  if (absl::Status checked = CheckMount(*parsed, &config); !checked.ok()) {
    PrintError(std::string(checked.message()));
    return kExitUsage;
  }
  const fuse::channel::FuseIo fuse_io = config.channel.fuse_io;
  config.options.fuse_io = std::string(fuse::channel::FuseIoName(fuse_io));
  const transport::TransportOptions& transport = config.options.transport;
  if (fuse_io == fuse::channel::FuseIo::kUring) {
    config.options.fuse_queues = fuse::channel::PossibleCpus();
    config.options.fuse_queue_depth = config.channel.queue_depth;
    config.options.fuse_queue_pin =
        std::string(fuse::channel::QueuePinName(config.channel.queue_pin));
  }
  // What the stats header shows: spreading needs the inline placement and
  // a second queue thread to spread to.
  config.channel.spread =
      config.channel.spread && fuse_io == fuse::channel::FuseIo::kUring &&
      transport.placement == transport::Placement::kInline &&
      config.options.fuse_queues > 1;
  config.options.fuse_spread = config.channel.spread ? "on" : "off";
  if (!config.fuse_io_note.empty()) {
    std::printf("pvdisk: %s\n", config.fuse_io_note.c_str());
  }
  if (config.foreground) return Serve(config, -1);

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
    setsid();
    if (chdir("/") != 0) {
      // Paths are absolute already; staying put only keeps a directory busy.
    }
    _exit(Serve(config, pipe_fds[1]));
  }
  close(pipe_fds[1]);
  std::string answer;
  char buffer[512];
  ssize_t got;
  while ((got = read(pipe_fds[0], buffer, sizeof(buffer))) > 0 ||
         (got < 0 && errno == EINTR)) {
    if (got > 0) answer.append(buffer, got);
  }
  close(pipe_fds[0]);
  if (answer == "ok\n") {
    std::printf("pvdisk: mounted %s at %s (daemon pid %d)\n",
                Describe(config).c_str(), config.mountpoint.c_str(), pid);
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
