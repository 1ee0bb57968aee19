// pvdisk create PATH --size SIZE [--force]
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "base/size.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "io/image_file.h"

namespace pvdisk::cli {

void PrintError(const std::string& message) {
  std::fprintf(stderr, "pvdisk: %s\n", message.c_str());
}

int RunCreate(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {
      {"size", true, false, "SIZE", "", "image size, e.g. 256M or 1G"},
      {"force", false, false, "", "", "overwrite an existing file"},
      {"help", false, false, "", "", "show this help"},
  };
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("create", specs, args);
  if (!parsed.ok()) {
    PrintError(std::string(parsed.status().message()));
    return kExitUsage;
  }
  if (parsed->Has("help")) {
    std::printf("usage: pvdisk create PATH --size SIZE [--force]\n%s",
                FlagHelp(specs).c_str());
    return kExitOk;
  }
  if (parsed->positional.size() != 1) {
    PrintError(
        "create takes exactly one PATH (usage: pvdisk create PATH "
        "--size SIZE [--force])");
    return kExitUsage;
  }
  if (!parsed->Has("size")) {
    PrintError("create needs --size SIZE, e.g. --size 256M");
    return kExitUsage;
  }
  absl::StatusOr<uint64_t> size = ParseSize(parsed->Get("size", ""));
  if (!size.ok()) {
    PrintError(absl::StrCat("--size: ", size.status().message()));
    return kExitUsage;
  }
  const std::string& path = parsed->positional[0];
  absl::Status created = io::CreateImage(path, *size, parsed->Has("force"));
  if (!created.ok()) {
    PrintError(std::string(created.message()));
    // What the user named is wrong (exists, bad size, no such folder): 2.
    // The system failed (no space, no permission): 1.
    bool bad_input = absl::IsInvalidArgument(created) ||
                     absl::IsAlreadyExists(created) ||
                     absl::IsNotFound(created);
    return bad_input ? kExitUsage : kExitFailure;
  }
  std::printf("pvdisk: created %s, %s sparse raw image\n", path.c_str(),
              FormatSize(*size).c_str());
  return kExitOk;
}

}  // namespace pvdisk::cli
