#include "cli/disk_arg.h"

#include <optional>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/size.h"
#include "cli/disk_options.h"

namespace pvdisk::cli {
namespace {

// The microseconds of delay=US or delay-write=US: digits only, 0 to
// io::kMaxDelayUs.
absl::StatusOr<uint32_t> ParseDelayUs(absl::string_view disk_text,
                                      absl::string_view key,
                                      absl::string_view value) {
  uint32_t us = 0;
  if (value.empty() || !absl::c_all_of(value, absl::ascii_isdigit) ||
      !absl::SimpleAtoi(value, &us) || us > io::kMaxDelayUs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--disk ", disk_text, ": ", key, " takes microseconds from 0 to ",
        io::kMaxDelayUs, " (a device latency model), e.g. ", key, "=2000"));
  }
  return us;
}

constexpr absl::string_view kRbdPrefix = "rbd:";
constexpr absl::string_view kRbdUsage =
    "rbd:POOL/IMAGE[,conf=PATH][,id=CLIENT][,timeout=SECONDS]";

// "rbd:POOL/IMAGE" -> the spec's pool and image.
absl::StatusOr<io::RbdSpec> ParseRbdName(absl::string_view text,
                                         absl::string_view name) {
  std::vector<std::string> names =
      absl::StrSplit(name.substr(kRbdPrefix.size()), '/');
  if (names.size() != 2 || names[0].empty() || names[1].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--disk ", text,
                     ": an RBD disk is named by its pool and "
                     "image: --disk ",
                     kRbdUsage));
  }
  if (names[1].find('@') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--disk ", text,
        ": snapshots (IMAGE@SNAP) cannot be served; give an image"));
  }
  io::RbdSpec rbd;
  rbd.pool = names[0];
  rbd.image = names[1];
  return rbd;
}

// An rbd: disk's own options: true if `option` was one (and is now in
// `rbd`), an error if it was one with a bad value.
absl::StatusOr<bool> ParseRbdOption(absl::string_view text,
                                    const std::string& option,
                                    io::RbdSpec* rbd) {
  if (option.rfind("conf=", 0) == 0 && option.size() > 5) {
    rbd->conf = option.substr(5);
  } else if (option.rfind("id=", 0) == 0 && option.size() > 3) {
    rbd->id = option.substr(3);
  } else if (option.rfind("timeout=", 0) == 0) {
    uint32_t seconds = 0;
    if (!absl::SimpleAtoi(option.substr(8), &seconds) || seconds == 0 ||
        seconds > io::kMaxRbdTimeoutSeconds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disk ", text, ": timeout takes whole seconds from 1 to ",
          io::kMaxRbdTimeoutSeconds, ", e.g. timeout=30"));
    }
    rbd->timeout_seconds = seconds;
  } else {
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<fuse::DiskSpec> ParseDiskArg(absl::string_view text) {
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(text.data(), text.size()), ',');
  fuse::DiskSpec spec;
  spec.arg = std::string(text);
  spec.path = parts[0];
  std::optional<uint32_t> delay_us;
  std::optional<uint32_t> delay_write_us;
  if (absl::string_view(spec.path).substr(0, kRbdPrefix.size()) == kRbdPrefix) {
    absl::StatusOr<io::RbdSpec> rbd = ParseRbdName(text, spec.path);
    if (!rbd.ok()) return rbd.status();
    spec.rbd = *rbd;
    spec.lock = false;  // an RBD image has its own exclusive lock
  }
  if (spec.path.empty()) {
    return absl::InvalidArgumentError(
        "--disk needs an image path: --disk PATH[,ro][,lock=off]"
        "[,format=raw|qcow2][,size=SIZE]"
        "[,eio=SECTOR[+COUNT]]");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& option = parts[i];
    if (spec.rbd) {
      absl::StatusOr<bool> taken = ParseRbdOption(text, option, &*spec.rbd);
      if (!taken.ok()) return taken.status();
      if (*taken) continue;
      if (option.rfind("lock=", 0) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--disk ", text,
            ": lock= applies to image files; an RBD image has its own "
            "exclusive lock"));
      }
    }
    if (option == "ro") {
      spec.read_only = true;
    } else if (option == "lock=off" || option == "lock=on") {
      spec.lock = option == "lock=on";
    } else if (option.rfind("format=", 0) == 0) {
      const std::string format = option.substr(7);
      if (spec.rbd) {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", text,
                         ": format= applies to image files; an RBD image is "
                         "served raw"));
      }
      if (format == "raw") {
        spec.format = image::ImageFormat::kRaw;
      } else if (format == "qcow2") {
        spec.format = image::ImageFormat::kQcow2;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", text, ": format takes raw or qcow2, not '",
                         format, "'"));
      }
    } else if (option.rfind("size=", 0) == 0) {
      absl::StatusOr<uint64_t> size = ParseSize(option.substr(5));
      if (!size.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", text, ": ", size.status().message()));
      }
      spec.expected_size = *size;
    } else if (option.rfind("l2_cache=", 0) == 0 && !spec.rbd) {
      absl::StatusOr<uint64_t> size = ParseSize(option.substr(9));
      if (!size.ok() || *size == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--disk ", text,
            ": l2_cache takes a positive size (e.g. l2_cache=4M), the L2 "
            "tables a qcow2 image keeps in memory"));
      }
      spec.l2_cache_bytes = *size;
    } else if (option.rfind("snapshot=", 0) == 0 && !spec.rbd) {
      spec.snapshot = option.substr(9);
      if (spec.snapshot.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--disk ", text,
            ": snapshot takes the id or name of a qcow2 internal snapshot "
            "(pvdisk info lists them)"));
      }
      spec.read_only = true;  // a snapshot is served read-only
    } else if (option == "cache=volatile" || option == "cache=writethrough") {
      spec.cache_volatile = option == "cache=volatile";
    } else if (option.rfind("cache=", 0) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disk ", text, ": cache takes volatile or writethrough, not '",
          option.substr(6), "'"));
    } else if (option.rfind("cache_size=", 0) == 0) {
      absl::StatusOr<uint64_t> size = ParseSize(option.substr(11));
      if (!size.ok() || *size < (1u << 20) || *size > (64ull << 30)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--disk ", text,
            ": cache_size takes a size from 1M to 64G (e.g. cache_size=256M), "
            "the most a volatile cache holds"));
      }
      spec.cache_bytes = *size;
    } else if (option.rfind("log=", 0) == 0) {
      if (option.size() == 4) {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", text,
                         ": log takes the file to write the log to, e.g. "
                         "log=/tmp/disk.log"));
      }
      spec.log_path = option.substr(4);
    } else if (option.rfind("eio=", 0) == 0) {
      std::vector<std::string> range = absl::StrSplit(option.substr(4), '+');
      io::FaultRange fault;
      if (range.size() > 2 ||
          !absl::SimpleAtoi(range[0], &fault.first_sector) ||
          (range.size() == 2 &&
           (!absl::SimpleAtoi(range[1], &fault.sector_count) ||
            fault.sector_count == 0))) {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", text,
                         ": eio takes SECTOR or SECTOR+COUNT (512-byte "
                         "sectors), e.g. eio=2048+8"));
      }
      spec.fault = fault;
    } else if (option.rfind("delay=", 0) == 0) {
      absl::StatusOr<uint32_t> us =
          ParseDelayUs(text, "delay", absl::string_view(option).substr(6));
      if (!us.ok()) return us.status();
      delay_us = *us;
    } else if (option.rfind("delay-write=", 0) == 0) {
      absl::StatusOr<uint32_t> us = ParseDelayUs(
          text, "delay-write", absl::string_view(option).substr(12));
      if (!us.ok()) return us.status();
      delay_write_us = *us;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--disk ", text, ": unknown option '", option,
          "'; allowed: ", AllowedDiskOptions(spec.rbd.has_value())));
    }
  }
  // delay= applies to every request, delay-write= overrides it for writes.
  if (delay_us || delay_write_us) {
    io::CompletionDelay delay;
    delay.us = delay_us.value_or(0);
    delay.write_us = delay_write_us.value_or(delay.us);
    spec.delay = delay;
  }
  return spec;
}

}  // namespace pvdisk::cli
