// pvdisk create PATH [--size SIZE] [--format raw|qcow2] [--cluster-size N]
//               [--backing FILE] [--extended-l2] [--force]
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "base/size.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "image/qcow2/create.h"
#include "io/image_file.h"

namespace pvdisk::cli {
namespace {

constexpr const char* kCreateUsage =
    "usage: pvdisk create PATH --size SIZE [--format raw|qcow2] "
    "[--cluster-size N] [--backing FILE] [--extended-l2] [--force]";

// What the user named is wrong (exists, bad size, no such folder or backing
// file): 2. The system failed (no space, no permission): 1.
int ExitFor(const absl::Status& status) {
  const bool bad_input = absl::IsInvalidArgument(status) ||
                         absl::IsAlreadyExists(status) ||
                         absl::IsNotFound(status);
  return bad_input ? kExitUsage : kExitFailure;
}

}  // namespace

const std::vector<FlagSpec>& CreateFlags() {
  static const std::vector<FlagSpec> specs = {
      {"size", true, false, "SIZE", "",
       "image size, e.g. 256M or 1G (qcow2 with --backing: the backing "
       "file's size if not given)"},
      {"format", true, false, "raw|qcow2", "raw", "image format"},
      {"cluster-size", true, false, "N", "64K",
       "qcow2 cluster size, a power of two from 512 to 2M"},
      {"backing", true, false, "FILE", "",
       "qcow2 backing file (raw or qcow2; a relative name is relative to "
       "PATH's folder)"},
      {"extended-l2", false, false, "", "",
       "qcow2 extended L2 entries: 32 subclusters per cluster (clusters of "
       "16K to 2M)"},
      {"force", false, false, "", "", "overwrite an existing file"},
      {"help", false, false, "", "", "show this help"},
  };
  return specs;
}

void PrintError(const std::string& message) {
  std::fprintf(stderr, "pvdisk: %s\n", message.c_str());
}

int RunCreate(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("create", CreateFlags(), args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    PrintCommandHelp("create");
    return kExitOk;
  }
  if (parsed->positional.size() != 1) {
    PrintError(
        absl::StrCat("create takes exactly one PATH (", kCreateUsage, ")"));
    return kExitUsage;
  }
  const std::string format = parsed->Get("format", "raw");
  if (format != "raw" && format != "qcow2") {
    PrintError(absl::StrCat("--format: unknown format '", format,
                            "'; allowed raw, qcow2"));
    return kExitUsage;
  }
  if (format == "raw") {
    for (const char* flag : {"cluster-size", "backing", "extended-l2"}) {
      if (!parsed->Has(flag)) continue;
      PrintError(absl::StrCat("--", flag, " needs --format qcow2"));
      return kExitUsage;
    }
  }
  const bool size_optional = format == "qcow2" && parsed->Has("backing");
  if (!parsed->Has("size") && !size_optional) {
    PrintError("create needs --size SIZE, e.g. --size 256M");
    return kExitUsage;
  }
  uint64_t size = 0;
  if (parsed->Has("size")) {
    absl::StatusOr<uint64_t> parsed_size = ParseSize(parsed->Get("size", ""));
    if (!parsed_size.ok()) {
      PrintError(absl::StrCat("--size: ", parsed_size.status().message()));
      return kExitUsage;
    }
    size = *parsed_size;
  }
  const std::string& path = parsed->positional[0];

  if (format == "raw") {
    absl::Status created = io::CreateImage(path, size, parsed->Has("force"));
    if (!created.ok()) {
      PrintError(std::string(created.message()));
      return ExitFor(created);
    }
    std::printf("pvdisk: created %s, %s sparse raw image\n", path.c_str(),
                FormatSize(size).c_str());
    return kExitOk;
  }

  image::qcow2::CreateOptions options;
  options.size = size;
  options.force = parsed->Has("force");
  options.backing = parsed->Get("backing", "");
  options.extended_l2 = parsed->Has("extended-l2");
  if (parsed->Has("cluster-size")) {
    absl::StatusOr<uint64_t> cluster =
        ParseSize(parsed->Get("cluster-size", ""));
    if (!cluster.ok()) {
      PrintError(absl::StrCat("--cluster-size: ", cluster.status().message(),
                              "; allowed a power of two from 512 to 2M"));
      return kExitUsage;
    }
    options.cluster_size = *cluster;
  }
  absl::Status created = image::qcow2::CreateQcow2(path, options);
  if (!created.ok()) {
    PrintError(std::string(created.message()));
    return ExitFor(created);
  }
  std::printf("pvdisk: created %s, qcow2 image%s\n", path.c_str(),
              options.backing.empty()
                  ? ""
                  : absl::StrCat(" over ", options.backing).c_str());
  return kExitOk;
}

}  // namespace pvdisk::cli
