#include "fuse/disk_control.h"

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pvdisk::fuse {
namespace {

absl::Status Refuse(absl::string_view text, absl::string_view why) {
  constexpr size_t kQuoted = 64;
  return absl::InvalidArgumentError(absl::StrCat(
      ".control: ", why, " '", absl::CEscape(text.substr(0, kQuoted)),
      text.size() > kQuoted ? "...'" : "'",
      "; allowed: attach, then pvdisk attach's words, one a line; or detach "
      "NAME [--force], one word a line"));
}

}  // namespace

absl::StatusOr<ControlRequest> ParseControlRequest(std::string_view raw) {
  const absl::string_view text(raw.data(), raw.size());
  absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(text);
  std::vector<std::string> lines = absl::StrSplit(trimmed, '\n');
  ControlRequest request;
  if (lines.empty()) return Refuse(text, "empty command");
  if (lines[0] == "attach") {
    request.command = ControlRequest::Command::kAttach;
    request.words.assign(lines.begin() + 1, lines.end());
    if (request.words.empty()) return Refuse(text, "attach without words in");
    return request;
  }
  if (lines[0] != "detach") return Refuse(text, "unknown command");
  request.command = ControlRequest::Command::kDetach;
  if (lines.size() < 2 || lines.size() > 3 || lines[1].empty() ||
      absl::StrContains(lines[1], '/')) {
    return Refuse(text, "detach needs one disk name in");
  }
  request.disk = lines[1];
  if (lines.size() == 3) {
    if (lines[2] != "--force")
      return Refuse(text, "detach takes only --force, not");
    request.force = true;
  }
  return request;
}

std::string FormatControlRequest(const ControlRequest& request) {
  if (request.command == ControlRequest::Command::kAttach) {
    return absl::StrCat("attach\n", absl::StrJoin(request.words, "\n"), "\n");
  }
  return absl::StrCat("detach\n", request.disk,
                      request.force ? "\n--force\n" : "\n");
}

int ControlErrno(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    case absl::StatusCode::kUnavailable:
      return EBUSY;
    case absl::StatusCode::kResourceExhausted:
      return ENOMEM;
    case absl::StatusCode::kPermissionDenied:
      return EACCES;
    case absl::StatusCode::kFailedPrecondition:
      return EOPNOTSUPP;
    case absl::StatusCode::kDataLoss:
      return EIO;
    default:
      return EINVAL;
  }
}

ControlWorker::ControlWorker() : thread_([this] { Loop(); }) {}

ControlWorker::~ControlWorker() { Stop(); }

void ControlWorker::Post(std::function<void()> job) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) {
      // The mount is ending (no new request reaches the file by then): run
      // it here rather than leave its caller unanswered.
      lock.unlock();
      job();
      return;
    }
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
}

void ControlWorker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ControlWorker::Loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace pvdisk::fuse
