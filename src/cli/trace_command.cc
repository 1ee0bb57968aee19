// pvdisk trace MOUNTPOINT [--disk NAME] [--seconds S] -o DIR
//              [--format blktrace|perfetto]
//
// Records every request of one disk of a running mount, through the
// mount's trace control file (trace/trace_control.h), for S seconds or
// until Ctrl-C (SIGINT) or SIGTERM, and writes it as blktrace's per-CPU
// files (DIR/NAME.blktrace.Q, one per queue: blkparse -i NAME, btt) or as
// a Perfetto timeline (DIR/NAME.perfetto.json). Prints one summary line.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/mount_stats.h"
#include "cli/stop_signal.h"
#include "stats/clock.h"
#include "trace/blktrace_writer.h"
#include "trace/control_client.h"
#include "trace/perfetto_writer.h"

namespace pvdisk::cli {

const std::vector<FlagSpec>& TraceFlags() {
  static const std::vector<FlagSpec> specs = {
      {"disk", true, false, "NAME", "the only disk",
       "the disk's file name in the mount (e.g. disk0.img); needed when "
       "the mount has several"},
      {"seconds", true, false, "S", "until Ctrl-C",
       "record for S seconds, 0.1 to 86400 (decimals allowed)"},
      {"output", true, false, "DIR", "",
       "(also -o) the existing folder the trace files go to"},
      {"format", true, false, "FORMAT", "blktrace",
       "blktrace: NAME.blktrace.Q per queue, for blkparse -i NAME and btt; "
       "perfetto: NAME.perfetto.json, for ui.perfetto.dev"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

namespace {

constexpr double kMinSeconds = 0.1;
constexpr double kMaxSeconds = 86400;
// Device numbers in the traces: major 240 (the "local/experimental use"
// range), minor the disk's place in the mount.
constexpr uint32_t kTraceMajor = 240;
// How long to wait before asking the daemon again when a read left its
// buffers nearly empty. Each ask is a FUSE round trip served by a queue's
// thread, so asking seldom keeps the cost off the request path; the
// buffers (trace/queue_trace.h) hold 64 Ki events per queue, over 100 ms
// of a queue's events at 100k requests/s.
constexpr long kIdlePollNs = 10'000'000;
// A read of at least this many events may have left more behind: ask again
// at once.
constexpr size_t kBusyReadEvents = 1024;
// How long reading goes on after the stop (see RunTraceLoop).
constexpr uint64_t kEndGraceNs = 100'000'000;

enum class Format { kBlktrace, kPerfetto };

struct TraceOptions {
  std::string mountpoint;
  std::string disk;    // empty: the only one
  double seconds = 0;  // 0: until interrupted
  std::string dir;
  Format format = Format::kBlktrace;
};

absl::Status CheckTrace(const ParsedArgs& parsed, TraceOptions* options) {
  if (parsed.positional.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pvdisk trace takes one MOUNTPOINT, got ",
                     parsed.positional.size(), " (see pvdisk trace --help)"));
  }
  options->mountpoint = parsed.positional[0];
  if (parsed.Has("disk")) {
    options->disk = parsed.Get("disk", "");
    if (options->disk.empty() || options->disk.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disk takes a disk's file name in the mount (e.g. disk0.img), "
          "got '",
          options->disk, "'"));
    }
  }
  if (parsed.Has("seconds")) {
    std::string text = parsed.Get("seconds", "");
    double seconds = 0;
    if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) ||
        seconds < kMinSeconds || seconds > kMaxSeconds) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seconds must be a number of seconds from ",
                       kMinSeconds, " to ", kMaxSeconds, ", got '", text, "'"));
    }
    options->seconds = seconds;
  }
  if (!parsed.Has("output")) {
    return absl::InvalidArgumentError(
        "pvdisk trace needs -o DIR: the folder the trace files go to");
  }
  options->dir = parsed.Get("output", "");
  std::string format = parsed.Get("format", "blktrace");
  if (format == "perfetto") {
    options->format = Format::kPerfetto;
  } else if (format != "blktrace") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--format must be blktrace or perfetto, got '", format, "'"));
  }
  return absl::OkStatus();
}

// The folder must exist and take new files; the files must not exist yet
// (a trace never overwrites one).
absl::Status CheckOutput(const TraceOptions& options,
                         const std::vector<std::string>& files) {
  struct stat st;
  if (stat(options.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("-o ", options.dir, ": not an existing folder"));
  }
  if (access(options.dir.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("-o ", options.dir, ": cannot write there"));
  }
  for (const std::string& file : files) {
    std::string path = absl::StrCat(options.dir, "/", file);
    if (access(path.c_str(), F_OK) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " exists already; a trace does not overwrite one"));
    }
  }
  return absl::OkStatus();
}

// A thread's name (/proc/TID/comm: the daemon's threads are named), for the
// traces' process notes and track names.
std::string ThreadName(uint32_t tid) {
  static std::map<uint32_t, std::string> names;
  auto it = names.find(tid);
  if (it != names.end()) return it->second;
  std::string name;
  std::ifstream comm(absl::StrCat("/proc/", tid, "/comm"));
  if (!std::getline(comm, name) || name.empty()) name = "pvdisk";
  return names[tid] = name;
}

// What the summary line counts.
struct Counts {
  uint64_t queued = 0, merged = 0, issued = 0, completed = 0, lost = 0;
  std::vector<uint64_t> lost_per_queue;
  void Add(const trace::TraceEvent& event) {
    bool lead = (event.flags & trace::kLeadFlag) != 0;
    switch (event.action) {
      case trace::TraceAction::kQueue:
        ++queued;
        break;
      case trace::TraceAction::kBackMerge:
      case trace::TraceAction::kFrontMerge:
        ++merged;
        break;
      case trace::TraceAction::kIssue:
        issued += lead;
        break;
      case trace::TraceAction::kComplete:
        completed += lead;
        break;
      case trace::TraceAction::kLost:
        lost += event.aux;
        if (event.queue < lost_per_queue.size()) {
          lost_per_queue[event.queue] += event.aux;
        }
        break;
      default:
        break;
    }
  }
};

int RunTraceLoop(const TraceOptions& options, const std::string& disk,
                 uint32_t disk_index, uint32_t queues) {
  std::vector<std::string> files;
  if (options.format == Format::kBlktrace) {
    for (uint32_t q = 0; q < queues; ++q) {
      files.push_back(absl::StrCat(disk, ".blktrace.", q));
    }
  } else {
    files.push_back(absl::StrCat(disk, ".perfetto.json"));
  }
  if (absl::Status output = CheckOutput(options, files); !output.ok()) {
    PrintError(absl::StrCat("trace: ", output.message()));
    return kExitUsage;
  }
  // The files first, so that a folder that takes none fails before the
  // daemon records anything; they go again if the trace cannot start.
  std::unique_ptr<trace::BlktraceWriter> blktrace;
  std::unique_ptr<trace::PerfettoWriter> perfetto;
  absl::Status made = absl::OkStatus();
  if (options.format == Format::kBlktrace) {
    auto writer = trace::BlktraceWriter::Create(
        options.dir, disk, queues, trace::blk::Device(kTraceMajor, disk_index),
        ThreadName);
    if (writer.ok()) blktrace = std::move(*writer);
    made = writer.status();
  } else {
    auto writer = trace::PerfettoWriter::Create(
        absl::StrCat(options.dir, "/", files[0]), ThreadName);
    if (writer.ok()) perfetto = std::move(*writer);
    made = writer.status();
  }
  if (!made.ok()) {
    PrintError(absl::StrCat("trace: ", made.message()));
    return kExitUsage;
  }
  absl::StatusOr<trace::ControlClient> client = trace::ControlClient::Start(
      options.mountpoint, disk,
      options.format == Format::kBlktrace ? trace::TraceScope::kBlock
                                          : trace::TraceScope::kAll);
  if (!client.ok()) {
    blktrace.reset();
    perfetto.reset();
    for (const std::string& file : files) {
      unlink(absl::StrCat(options.dir, "/", file).c_str());
    }
    PrintError(absl::StrCat("trace: ", client.status().message()));
    return client.status().code() == absl::StatusCode::kUnavailable
               ? kExitFailure
               : kExitUsage;
  }
  // On stderr, so that whoever waits for the recording to begin can tell.
  std::fprintf(stderr, "pvdisk trace: recording %s of %s%s\n", disk.c_str(),
               options.mountpoint.c_str(),
               options.seconds > 0 ? "" : " until Ctrl-C");
  std::fflush(stderr);

  Counts counts;
  counts.lost_per_queue.assign(queues, 0);
  uint64_t start_ns = stats::MonotonicNanos();
  uint64_t end_ns = options.seconds > 0
                        ? start_ns + static_cast<uint64_t>(
                                         std::llround(options.seconds * 1e9))
                        : UINT64_MAX;
  std::vector<trace::TraceEvent> events;
  absl::Status status = absl::OkStatus();
  // Recording ends at the deadline or a signal; what the daemon recorded
  // until then is read to the end before the trace is stopped. A request's
  // reply step is recorded just after its reply is sent, so a request the
  // application saw done before the stop may still have its last step on
  // the way: reading goes on for kEndGraceNs after the stop, until a read
  // finds nothing.
  bool ending = false;
  uint64_t ending_ns = 0;
  for (;;) {
    if (!ending && (StopRequested() || stats::MonotonicNanos() >= end_ns)) {
      ending = true;
      ending_ns = stats::MonotonicNanos();
    }
    events.clear();
    absl::StatusOr<size_t> got = client->Read(&events);
    if (!got.ok()) {
      status = got.status();
      break;
    }
    for (const trace::TraceEvent& event : events) {
      counts.Add(event);
      if (blktrace) blktrace->Add(event);
      if (perfetto) perfetto->Add(event);
    }
    if (*got >= kBusyReadEvents) continue;
    if (ending && *got == 0 &&
        stats::MonotonicNanos() >= ending_ns + kEndGraceNs) {
      break;
    }
    if (ending && *got > 0) continue;
    timespec idle = {0, kIdlePollNs};
    nanosleep(&idle, nullptr);
  }
  uint64_t elapsed_ns = stats::MonotonicNanos() - start_ns;
  absl::Status finished = blktrace ? blktrace->Finish(counts.lost_per_queue)
                                   : perfetto->Finish(counts.lost);
  if (status.ok()) status = finished;
  if (!status.ok()) {
    PrintError(absl::StrCat("trace: ", status.message()));
    return kExitFailure;
  }
  std::printf(
      "pvdisk trace: %s for %.1f s: %llu queued (Q), %llu merged (M/F), "
      "%llu issued (D), %llu completed (C), %llu events lost; wrote %s/%s\n",
      disk.c_str(), static_cast<double>(elapsed_ns) / 1e9,
      static_cast<unsigned long long>(counts.queued),
      static_cast<unsigned long long>(counts.merged),
      static_cast<unsigned long long>(counts.issued),
      static_cast<unsigned long long>(counts.completed),
      static_cast<unsigned long long>(counts.lost), options.dir.c_str(),
      options.format == Format::kBlktrace
          ? absl::StrCat(disk, ".blktrace.{0..", queues - 1, "}").c_str()
          : files[0].c_str());
  return kExitOk;
}

}  // namespace

int RunTrace(const std::vector<std::string>& args) {
  // -o is --output's short form.
  std::vector<std::string> words;
  for (const std::string& arg : args) {
    words.push_back(arg == "-o" ? "--output" : arg);
  }
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("trace", TraceFlags(), words);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("trace");
    return kExitOk;
  }
  TraceOptions options;
  if (absl::Status checked = CheckTrace(*parsed, &options); !checked.ok()) {
    PrintError(std::string(checked.message()));
    return kExitUsage;
  }
  absl::StatusOr<MountEntry> mount = RequirePvdiskMount(options.mountpoint);
  if (!mount.ok()) {
    PrintError(absl::StrCat("trace: ", mount.status().message()));
    return kExitUsage;
  }
  options.mountpoint = mount->mount_point;
  absl::StatusOr<stats::StatsDocument> document =
      ReadMountStats(options.mountpoint);
  if (!document.ok()) {
    PrintError(absl::StrCat("trace: ", document.status().message()));
    return kExitFailure;
  }
  std::vector<std::string> names;
  for (const stats::DiskDocument& disk : document->disks) {
    names.push_back(disk.name);
  }
  if (options.disk.empty()) {
    if (names.size() != 1) {
      PrintError(absl::StrCat(
          "trace: ", options.mountpoint, " has ", names.size(), " disks (",
          absl::StrJoin(names, ", "), "); name one with --disk"));
      return kExitUsage;
    }
    options.disk = names[0];
  }
  for (uint32_t i = 0; i < names.size(); ++i) {
    if (names[i] != options.disk) continue;
    CatchStopSignals();
    return RunTraceLoop(
        options, options.disk, i,
        static_cast<uint32_t>(document->disks[i].queues.size()));
  }
  PrintError(absl::StrCat("trace: --disk: no disk named '", options.disk,
                          "' in ", options.mountpoint,
                          "; it has: ", absl::StrJoin(names, ", ")));
  return kExitUsage;
}

}  // namespace pvdisk::cli
