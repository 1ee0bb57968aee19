// pvdisk stat MOUNTPOINT [--interval S] [--count N] [--queues] [--disk NAME]
//                        [--json]
//
// iostat -x for a pvdisk mount: every interval, one row per disk (and per
// queue with --queues) of rates over the interval, from the daemon's
// stats.json. The first report covers the time since the mount or the last
// reset, as iostat's first covers the time since boot. Runs until --count
// reports are printed or Ctrl-C (SIGINT) or SIGTERM, which end it quietly
// with status 0.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
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
#include "stats/iostat.h"
#include "stats/render.h"
#include "stats/text_table.h"

namespace pvdisk::cli {

const std::vector<FlagSpec>& StatFlags() {
  static const std::vector<FlagSpec> specs = {
      {"interval", true, false, "SECONDS", "1",
       "seconds between reports, 0.1 to 86400 (decimals allowed)"},
      {"count", true, false, "N", "until Ctrl-C",
       "print N reports and stop; the first covers the time since mount"},
      {"queues", false, false, "", "", "a row per queue below each disk's"},
      {"disk", true, false, "NAME", "every disk",
       "only the disk with this file name in the mount (e.g. disk0.img)"},
      {"json", false, false, "", "",
       "one JSON object per report and line, with the same column names"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

namespace {

constexpr double kMinIntervalSeconds = 0.1;
constexpr double kMaxIntervalSeconds = 86400;
constexpr uint64_t kMaxCount = 1'000'000'000;

struct StatOptions {
  std::string mountpoint;
  uint64_t interval_ns = 1'000'000'000;
  uint64_t count = 0;  // 0: until interrupted
  bool queues = false;
  std::string disk;  // empty: all
  bool json = false;
};

absl::Status CheckStat(const ParsedArgs& parsed, StatOptions* options) {
  if (parsed.positional.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pvdisk stat takes one MOUNTPOINT, got ",
                     parsed.positional.size(), " (see pvdisk stat --help)"));
  }
  options->mountpoint = parsed.positional[0];
  if (parsed.Has("interval")) {
    std::string text = parsed.Get("interval", "");
    double seconds = 0;
    if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) ||
        seconds < kMinIntervalSeconds || seconds > kMaxIntervalSeconds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--interval must be a number of seconds from ", kMinIntervalSeconds,
          " to ", kMaxIntervalSeconds, ", got '", text, "'"));
    }
    options->interval_ns = static_cast<uint64_t>(std::llround(seconds * 1e9));
  }
  if (parsed.Has("count")) {
    absl::StatusOr<uint64_t> count =
        ParseNumber("--count", parsed.Get("count", ""), 1, kMaxCount);
    if (!count.ok()) return count.status();
    options->count = *count;
  }
  options->queues = parsed.Has("queues");
  options->json = parsed.Has("json");
  if (parsed.Has("disk")) {
    options->disk = parsed.Get("disk", "");
    if (options->disk.empty() || options->disk.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disk takes a disk's file name in the mount (e.g. disk0.img), "
          "got '",
          options->disk, "'"));
    }
  }
  return absl::OkStatus();
}

// Sleeps until `deadline_ns` on CLOCK_MONOTONIC or a stop signal.
void SleepUntil(uint64_t deadline_ns) {
  timespec deadline = {static_cast<time_t>(deadline_ns / 1'000'000'000),
                       static_cast<long>(deadline_ns % 1'000'000'000)};
  while (!StopRequested() && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
                                             &deadline, nullptr) == EINTR) {
  }
}

uint64_t MonotonicNow() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 +
         static_cast<uint64_t>(now.tv_nsec);
}

// One row of a report: whose it is and its values.
struct Row {
  std::string disk;
  std::string queue;  // "all" for the disk's total, else the queue number
  std::vector<double> values;
};

// Counts as whole numbers, everything else with at least 3 decimals.
std::string JsonNumber(double value, int decimals) {
  return absl::StrFormat("%.*f", decimals == 0 ? 0 : std::max(decimals, 3),
                         value);
}

std::string JsonRowFields(const Row& row) {
  std::vector<std::string> fields;
  for (size_t c = 0; c < stats::kNumIostatColumns; ++c) {
    fields.push_back(absl::StrCat(
        "\"", stats::kIostatColumns[c].name,
        "\": ", JsonNumber(row.values[c], stats::kIostatColumns[c].decimals)));
  }
  return absl::StrJoin(fields, ", ");
}

// {"mountpoint": ..., "time": unix seconds, "interval_s": ..., "since":
// "mount"|"previous", "disks": [{"disk": ..., <columns>, "queues": [...]}]}
std::string JsonReport(const std::string& mountpoint, double interval_s,
                       bool first, const std::vector<Row>& rows) {
  std::vector<std::string> disks;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].queue != "all") continue;
    std::string disk =
        absl::StrCat("{\"disk\": ", stats::JsonString(rows[i].disk), ", ",
                     JsonRowFields(rows[i]));
    std::vector<std::string> queues;
    for (size_t q = i + 1; q < rows.size() && rows[q].queue != "all"; ++q) {
      queues.push_back(absl::StrCat("{\"queue\": ", rows[q].queue, ", ",
                                    JsonRowFields(rows[q]), "}"));
    }
    if (!queues.empty()) {
      absl::StrAppend(&disk, ", \"queues\": [", absl::StrJoin(queues, ", "),
                      "]");
    }
    disks.push_back(disk + "}");
  }
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  return absl::StrCat(
      "{\"mountpoint\": ", stats::JsonString(mountpoint),
      ", \"time\": ", absl::StrFormat("%.3f", wall.tv_sec + wall.tv_nsec / 1e9),
      ", \"interval_s\": ", absl::StrFormat("%.3f", interval_s),
      ", \"since\": \"", first ? "mount" : "previous", "\", \"disks\": [",
      absl::StrJoin(disks, ", "), "]}\n");
}

std::string TextReport(const std::string& mountpoint, double interval_s,
                       bool first, const std::vector<Row>& rows) {
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  struct tm local;
  localtime_r(&wall.tv_sec, &local);
  char clock_text[32];
  strftime(clock_text, sizeof(clock_text), "%H:%M:%S", &local);
  std::string out =
      absl::StrFormat("%s  %s  %.2f s%s\n", mountpoint, clock_text, interval_s,
                      first ? " since mount (or reset)" : "");
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header = {"disk", "queue"};
  for (const stats::IostatColumn& column : stats::kIostatColumns) {
    header.emplace_back(column.name);
  }
  cells.push_back(header);
  for (const Row& row : rows) {
    std::vector<std::string> line = {row.disk, row.queue};
    for (size_t c = 0; c < stats::kNumIostatColumns; ++c) {
      line.push_back(absl::StrFormat("%.*f", stats::kIostatColumns[c].decimals,
                                     row.values[c]));
    }
    cells.push_back(line);
  }
  return out + stats::AlignColumns(cells, 2, " ") + "\n";
}

// The rows between two documents of the same mount. A disk or queue missing
// from `before` (the first report) counts from zero.
std::vector<Row> Rows(const stats::StatsDocument& before,
                      const stats::StatsDocument& after, uint64_t interval_ns,
                      const StatOptions& options) {
  static const stats::QueueSnapshot kZero;
  std::vector<Row> rows;
  for (size_t d = 0; d < after.disks.size(); ++d) {
    const stats::DiskDocument& disk = after.disks[d];
    if (!options.disk.empty() && disk.name != options.disk) continue;
    const stats::DiskDocument* old =
        d < before.disks.size() ? &before.disks[d] : nullptr;
    rows.push_back(Row{
        disk.name, "all",
        stats::IostatRow(old ? old->total : kZero, disk.total, interval_ns)});
    if (!options.queues) continue;
    for (size_t q = 0; q < disk.queues.size(); ++q) {
      const stats::QueueSnapshot& from =
          old && q < old->queues.size() ? old->queues[q] : kZero;
      rows.push_back(Row{disk.name, absl::StrCat(q),
                         stats::IostatRow(from, disk.queues[q], interval_ns)});
    }
  }
  return rows;
}

int RunStatLoop(const StatOptions& options, const std::string& mountpoint) {
  absl::StatusOr<stats::StatsDocument> current = ReadMountStats(mountpoint);
  if (!current.ok()) {
    PrintError(std::string(current.status().message()));
    return kExitFailure;
  }
  if (!options.disk.empty()) {
    std::vector<std::string> names;
    for (const auto& disk : current->disks) names.push_back(disk.name);
    if (std::find(names.begin(), names.end(), options.disk) == names.end()) {
      PrintError(absl::StrCat("--disk: no disk named '", options.disk, "' in ",
                              mountpoint,
                              "; disks: ", absl::StrJoin(names, ", ")));
      return kExitUsage;
    }
  }
  stats::StatsDocument previous;  // since_ns 0: nothing reported yet
  uint64_t next_ns = MonotonicNow();
  for (uint64_t printed = 0;;) {
    // The first report, and the first after a reset, count from the
    // counters' start.
    bool from_start = current->since_ns != previous.since_ns;
    if (from_start) {
      previous = stats::StatsDocument();
      previous.now_ns = current->since_ns;
      previous.since_ns = current->since_ns;
    }
    uint64_t interval_ns = current->now_ns - previous.now_ns;
    std::vector<Row> rows = Rows(previous, *current, interval_ns, options);
    double interval_s = static_cast<double>(interval_ns) / 1e9;
    std::string report =
        options.json ? JsonReport(mountpoint, interval_s, from_start, rows)
                     : TextReport(mountpoint, interval_s, from_start, rows);
    std::fputs(report.c_str(), stdout);
    std::fflush(stdout);
    if (options.count != 0 && ++printed >= options.count) return kExitOk;
    next_ns += options.interval_ns;
    SleepUntil(next_ns);
    if (StopRequested()) return kExitOk;
    previous = std::move(*current);
    current = ReadMountStats(mountpoint);
    if (!current.ok()) {
      PrintError(std::string(current.status().message()));
      return kExitFailure;
    }
  }
}

}  // namespace

int RunStat(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("stat", StatFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("stat");
    return kExitOk;
  }
  StatOptions options;
  if (absl::Status checked = CheckStat(*parsed, &options); !checked.ok()) {
    PrintError(std::string(checked.message()));
    return kExitUsage;
  }
  absl::StatusOr<MountEntry> mount = RequirePvdiskMount(options.mountpoint);
  if (!mount.ok()) {
    PrintError(absl::StrCat("stat: ", mount.status().message()));
    return kExitUsage;
  }
  CatchStopSignals();
  return RunStatLoop(options, mount->mount_point);
}

}  // namespace pvdisk::cli
