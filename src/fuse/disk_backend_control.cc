#include "fuse/disk_backend_control.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "transport/process/wire.h"

namespace pvdisk::fuse {
namespace {

using transport::process::WireReader;
using transport::process::WireWriter;

constexpr const char* kKeepNames[] = {"none", "all", "random"};

absl::Status Malformed(const std::string& what) {
  return absl::DataLossError(
      absl::StrCat("malformed answer to '", what, "' from the backend"));
}

std::string EncodeCut(const io::PowerCutResult& cut) {
  WireWriter out;
  out.PutU64(cut.kept_writes);
  out.PutU64(cut.kept_bytes);
  out.PutU64(cut.dropped_writes);
  out.PutU64(cut.dropped_bytes);
  return out.data();
}

std::string EncodeCounts(const BackendDiskCounts& counts) {
  WireWriter out;
  out.PutU64(counts.cache.unsafe_bytes);
  out.PutU64(counts.cache.unsafe_bytes_max);
  out.PutU64(counts.cache.flushes);
  out.PutU64(counts.cache.full_flushes);
  out.PutU64(counts.cache.full_waits);
  out.PutU64(counts.log.entries);
  out.PutU64(counts.log.bytes);
  out.PutString(counts.log_failed);
  return out.data();
}

}  // namespace

DiskBackendControl::DiskBackendControl(std::shared_ptr<image::Image> image,
                                       std::shared_ptr<io::VolatileCache> cache,
                                       std::shared_ptr<io::WriteLog> log)
    : image_(std::move(image)),
      cache_(std::move(cache)),
      log_(std::move(log)) {}

absl::StatusOr<std::string> DiskBackendControl::Handle(
    std::string_view request) {
  const std::string text(request);
  // A mark's name is the rest of the line, checked by the log itself.
  constexpr std::string_view kMark = "mark ";
  if (text.compare(0, kMark.size(), kMark) == 0) {
    if (!log_) return absl::FailedPreconditionError("the disk has no log");
    PVDISK_RETURN_IF_ERROR(log_->AppendMark(request.substr(kMark.size())));
    return std::string();
  }
  const std::vector<std::string> words = absl::StrSplit(text, ' ');
  const std::string& command = words[0];
  if (command == "powercut" && words.size() == 3) {
    if (!cache_) {
      return absl::FailedPreconditionError("the disk has no volatile cache");
    }
    io::PowerKeep keep;
    uint64_t seed = 0;
    if (words[1] == "none") {
      keep = io::PowerKeep::kNone;
    } else if (words[1] == "all") {
      keep = io::PowerKeep::kAll;
    } else if (words[1] == "random") {
      keep = io::PowerKeep::kRandom;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("no keep ", words[1]));
    }
    if (!absl::SimpleAtoi(words[2], &seed)) {
      return absl::InvalidArgumentError(absl::StrCat("no seed ", words[2]));
    }
    PVDISK_ASSIGN_OR_RETURN(io::PowerCutResult cut,
                            cache_->PowerCut(keep, seed));
    return EncodeCut(cut);
  }
  if (command == "counts" && words.size() == 1) {
    BackendDiskCounts counts;
    if (cache_) counts.cache = cache_->counts();
    if (log_) {
      counts.log = log_->counts();
      counts.log_failed = log_->failed();
    }
    return EncodeCounts(counts);
  }
  if (command == "reset" && words.size() == 1) {
    if (cache_) cache_->ResetCounts();
    if (log_) log_->ResetCounts();
    return std::string();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown disk control request '", text, "'"));
}

void DiskBackendControl::Stopped() {
  if (cache_) {
    if (absl::Status written = cache_->WriteOutAll(); !written.ok()) {
      LogInfo("%s", written.message());
    }
  }
  if (absl::Status flushed = image_->Flush(); !flushed.ok()) {
    LogInfo("%s", flushed.message());
  }
  if (log_) {
    if (absl::Status closed = log_->Close(); !closed.ok()) {
      LogInfo("%s", closed.message());
    }
  }
}

absl::StatusOr<io::PowerCutResult> RemotePowerCut(
    transport::process::BackendSupervisor& backend, io::PowerKeep keep,
    uint64_t seed) {
  const std::string request =
      absl::StrCat("powercut ", kKeepNames[static_cast<int>(keep)], " ", seed);
  PVDISK_ASSIGN_OR_RETURN(std::string answer,
                          backend.Control(request, kPowerCutAnswerTimeout));
  WireReader in(answer);
  io::PowerCutResult cut;
  if (!in.GetU64(&cut.kept_writes) || !in.GetU64(&cut.kept_bytes) ||
      !in.GetU64(&cut.dropped_writes) || !in.GetU64(&cut.dropped_bytes)) {
    return Malformed("powercut");
  }
  return cut;
}

absl::Status RemoteMark(transport::process::BackendSupervisor& backend,
                        std::string_view name) {
  return backend
      .Control(absl::StrCat("mark ", std::string(name)), kControlAnswerTimeout)
      .status();
}

absl::StatusOr<BackendDiskCounts> RemoteCounts(
    transport::process::BackendSupervisor& backend) {
  PVDISK_ASSIGN_OR_RETURN(std::string answer,
                          backend.Control("counts", kControlAnswerTimeout));
  WireReader in(answer);
  BackendDiskCounts counts;
  if (!in.GetU64(&counts.cache.unsafe_bytes) ||
      !in.GetU64(&counts.cache.unsafe_bytes_max) ||
      !in.GetU64(&counts.cache.flushes) ||
      !in.GetU64(&counts.cache.full_flushes) ||
      !in.GetU64(&counts.cache.full_waits) || !in.GetU64(&counts.log.entries) ||
      !in.GetU64(&counts.log.bytes) || !in.GetString(&counts.log_failed)) {
    return Malformed("counts");
  }
  return counts;
}

absl::Status RemoteResetCounts(transport::process::BackendSupervisor& backend) {
  return backend.Control("reset", kControlAnswerTimeout).status();
}

}  // namespace pvdisk::fuse
