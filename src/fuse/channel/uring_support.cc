#include "fuse/channel/uring_support.h"

#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"

namespace pvdisk::fuse::channel {

absl::StatusOr<FuseIo> ParseFuseIo(std::string_view text) {
  if (text == "auto") return FuseIo::kAuto;
  if (text == "uring") return FuseIo::kUring;
  if (text == "classic") return FuseIo::kClassic;
  return absl::InvalidArgumentError(
      absl::StrCat("--fuse-io '", absl::string_view(text.data(), text.size()),
                   "' is not allowed: use auto, uring or classic"));
}

std::string_view FuseIoName(FuseIo io) {
  switch (io) {
    case FuseIo::kAuto:
      return "auto";
    case FuseIo::kUring:
      return "uring";
    case FuseIo::kClassic:
      return "classic";
  }
  return "?";
}

UringSupport CheckUringSupport(bool may_turn_on, const std::string& parameter) {
  UringSupport support;
  std::ifstream reader(parameter);
  std::string value;
  if (!reader || !std::getline(reader, value)) {
    support.why_not =
        absl::StrCat("this kernel has no FUSE over io_uring (no ", parameter,
                     "; it needs Linux 6.14+ with CONFIG_FUSE_IO_URING)");
    return support;
  }
  if (value == "Y" || value == "1") {
    support.available = true;
    return support;
  }
  if (may_turn_on && geteuid() == 0) {
    std::ofstream writer(parameter);
    writer << "Y\n";
    writer.close();
    std::ifstream again(parameter);
    if (writer && std::getline(again, value) &&
        (value == "Y" || value == "1")) {
      support.available = true;
      support.turned_on = true;
      return support;
    }
  }
  support.why_not =
      absl::StrCat("FUSE over io_uring is switched off (", parameter,
                   " is N); as root: echo Y > ", parameter);
  return support;
}

absl::StatusOr<FuseIo> ResolveFuseIo(FuseIo wanted, std::string* note,
                                     const std::string& parameter) {
  note->clear();
  if (wanted == FuseIo::kClassic) return FuseIo::kClassic;
  UringSupport support = CheckUringSupport(/*may_turn_on=*/true, parameter);
  if (support.turned_on) {
    *note =
        absl::StrCat("turned on FUSE over io_uring (", parameter, " was N)");
  }
  if (support.available) return FuseIo::kUring;
  if (wanted == FuseIo::kAuto) return FuseIo::kClassic;
  return absl::InvalidArgumentError(
      absl::StrCat("--fuse-io uring is not possible: ", support.why_not));
}

uint32_t PossibleCpus() {
  // "0-1", "0-3,5": the kernel's cpu_possible_mask; queues are numbered by
  // CPU, so the count is the highest CPU + 1.
  std::ifstream file("/sys/devices/system/cpu/possible");
  std::string text;
  if (!std::getline(file, text) || text.empty()) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? static_cast<uint32_t>(n) : 1;
  }
  size_t last = text.find_last_of(",-");
  std::string tail = last == std::string::npos ? text : text.substr(last + 1);
  return static_cast<uint32_t>(std::stoul(tail)) + 1;
}

}  // namespace pvdisk::fuse::channel
