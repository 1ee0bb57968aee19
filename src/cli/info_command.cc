// pvdisk info IMAGE [--json]: an image's format, virtual size, cluster
// size, allocated bytes, features and backing chain.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
                                   : stats::JsonString(l.backing_format));
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
