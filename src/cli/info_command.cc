// pvdisk info IMAGE [--json]: an image's format, virtual size, cluster
// size, allocated bytes, features, backing chain and internal snapshots.
#include <time.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/size.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "image/qcow2/info.h"
#include "stats/render.h"

namespace pvdisk::cli {
namespace {

using image::qcow2::LayerInfo;
using image::qcow2::Snapshot;

// The snapshot list as qemu-img info shows it (the date in local time,
// the guest clock as hours:minutes:seconds.milliseconds), with each
// snapshot's disk size, and why a snapshot cannot be served, if it cannot.
std::string SnapshotText(const std::vector<Snapshot>& snapshots) {
  std::string out = "snapshots:\n";
  absl::StrAppend(
      &out, absl::StrFormat("  %-9s %-17s %9s %19s %12s %s\n", "ID", "TAG",
                            "VM SIZE", "DATE", "VM CLOCK", "DISK SIZE"));
  for (const Snapshot& s : snapshots) {
    const time_t when = static_cast<time_t>(s.date_sec);
    struct tm tm = {};
    char date[32] = "";
    localtime_r(&when, &tm);
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
    const uint64_t ms = s.vm_clock_nsec / 1000000;
    const std::string clock =
        absl::StrFormat("%02d:%02d:%02d.%03d", ms / 3600000, ms / 60000 % 60,
                        ms / 1000 % 60, ms % 1000);
    absl::StrAppend(
        &out, absl::StrFormat("  %-9s %-17s %9s %19s %12s %s", s.id, s.name,
                              FormatSize(s.vm_state_size), date, clock,
                              FormatSize(s.disk_size)));
    if (!s.problem.empty())
      absl::StrAppend(&out, " (unusable: ", s.problem, ")");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string SnapshotJson(const std::vector<Snapshot>& snapshots) {
  std::vector<std::string> items;
  for (const Snapshot& s : snapshots) {
    items.push_back(absl::StrCat(
        "{\"id\": ", stats::JsonString(s.id), ", \"name\": ",
        stats::JsonString(s.name), ", \"disk_size\": ", s.disk_size,
        ", \"vm_state_size\": ", s.vm_state_size,
        ", \"date_sec\": ", s.date_sec, ", \"date_nsec\": ", s.date_nsec,
        ", \"vm_clock_nsec\": ", s.vm_clock_nsec, ", \"problem\": ",
        s.problem.empty() ? "null" : stats::JsonString(s.problem), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string Text(const std::vector<LayerInfo>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerInfo& l = layers[i];
    if (i > 0) absl::StrAppend(&out, "backing file (depth ", i, "):\n");
    absl::StrAppend(&out, "image: ", l.path, "\n");
    absl::StrAppend(&out, "format: ", l.format, "\n");
    absl::StrAppend(&out, "virtual size: ", FormatSize(l.virtual_size), " (",
                    l.virtual_size, " bytes)\n");
    absl::StrAppend(&out, "file size: ", l.file_bytes, " bytes (", l.disk_bytes,
                    " on disk)\n");
    if (l.format == "qcow2") {
      absl::StrAppend(&out, "qcow2 version: ", l.version, "\n");
      absl::StrAppend(&out, "cluster size: ", l.cluster_size, "\n");
      absl::StrAppend(&out, "refcount bits: ", l.refcount_bits, "\n");
      absl::StrAppend(&out, "allocated: ", l.allocated_bytes, " bytes\n");
      absl::StrAppend(
          &out, "features: ", l.features.empty() ? "none" : l.features, "\n");
      if (!l.backing_file.empty()) {
        absl::StrAppend(&out, "backing file: ", l.backing_file,
                        l.backing_format.empty()
                            ? std::string()
                            : absl::StrCat(" (format ", l.backing_format, ")"),
                        "\n");
      }
      if (!l.snapshots.empty())
        absl::StrAppend(&out, SnapshotText(l.snapshots));
    }
  }
  return out;
}

std::string Json(const std::vector<LayerInfo>& layers) {
  std::vector<std::string> items;
  for (const LayerInfo& l : layers) {
    std::string item = absl::StrCat(
        "{\"path\": ", stats::JsonString(l.path),
        ", \"format\": ", stats::JsonString(l.format),
        ", \"virtual_size\": ", l.virtual_size,
        ", \"file_size\": ", l.file_bytes, ", \"disk_size\": ", l.disk_bytes);
    if (l.format == "qcow2") {
      absl::StrAppend(
          &item, ", \"version\": ", l.version,
          ", \"cluster_size\": ", l.cluster_size,
          ", \"refcount_bits\": ", l.refcount_bits,
          ", \"allocated\": ", l.allocated_bytes,
          ", \"features\": ", stats::JsonString(l.features),
          ", \"backing_file\": ",
          l.backing_file.empty() ? "null" : stats::JsonString(l.backing_file),
          ", \"backing_format\": ",
          l.backing_format.empty() ? "null"
                                   : stats::JsonString(l.backing_format),
          ", \"snapshots\": ", SnapshotJson(l.snapshots));
    }
    absl::StrAppend(&item, "}");
    items.push_back(item);
  }
  return absl::StrCat("{\"chain\": [", absl::StrJoin(items, ", "), "]}\n");
}

}  // namespace

const std::vector<FlagSpec>& InfoFlags() {
  static const std::vector<FlagSpec> specs = {
      {"json", false, false, "", "", "print one JSON object"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

int RunInfo(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("info", InfoFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("info");
    return kExitOk;
  }
  if (parsed->positional.size() != 1) {
    PrintError(
        "info takes exactly one IMAGE (usage: pvdisk info IMAGE "
        "[--json])");
    return kExitUsage;
  }
  absl::StatusOr<std::vector<LayerInfo>> layers =
      image::qcow2::DescribeImage(parsed->positional[0]);
  if (!layers.ok()) {
    PrintError(std::string(layers.status().message()));
    const absl::Status& s = layers.status();
    return absl::IsInvalidArgument(s) || absl::IsNotFound(s) ||
                   absl::IsDataLoss(s) || absl::IsFailedPrecondition(s)
               ? kExitUsage
               : kExitFailure;
  }
  std::string out = parsed->Has("json") ? Json(*layers) : Text(*layers);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace pvdisk::cli
