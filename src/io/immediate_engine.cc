#include "io/immediate_engine.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "io/deadline.h"
#include "io/request_check.h"

namespace pvdisk::io {

ImmediateEngine::ImmediateEngine(std::vector<uint64_t> file_bytes,
                                 uint32_t capacity)
    : file_bytes_(std::move(file_bytes)) {
  pending_.reserve(capacity);
}

int ImmediateEngine::Queue(const IoRequest& request) {
  if (int rc = CheckRequest(request, file_bytes_.data(), file_bytes_.size());
      rc != 0) {
    return rc;
  }
  pending_.push_back(IoCompletion{request.tag, Perform(request), false});
  return 0;
}

absl::Status ImmediateEngine::WatchWakeFd(int fd, uint64_t tag) {
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot watch wake fd ", fd, ": not a descriptor"));
  }
  wake_fds_.push_back(pollfd{fd, POLLIN, 0});
  wake_tags_.push_back(tag);
  return absl::OkStatus();
}

int ImmediateEngine::Run(bool wait, std::vector<IoCompletion>& out) {
  return Collect(wait, kNoDeadline, out);
}

int ImmediateEngine::RunUntil(int64_t deadline_ns,
                              std::vector<IoCompletion>& out) {
  return Collect(/*wait=*/true, deadline_ns, out);
}

int ImmediateEngine::Collect(bool wait, int64_t deadline_ns,
                             std::vector<IoCompletion>& out) {
  int appended = static_cast<int>(pending_.size());
  out.insert(out.end(), pending_.begin(), pending_.end());
  pending_.clear();
  const bool timed = deadline_ns != kNoDeadline;
  if (wake_fds_.empty() && !timed) return appended;

  // With results to return, only pick up wake-ups that are already there.
  const bool block = wait && appended == 0;
  do {
    int rc = PollWakeFds(block ? deadline_ns : 0, out);
    if (rc < 0) return appended > 0 ? appended : rc;
    appended += rc;
  } while (block && appended == 0 &&
           (!timed || MonotonicNowNs() < deadline_ns));
  return appended;
}

int ImmediateEngine::PollWakeFds(int64_t deadline_ns,
                                 std::vector<IoCompletion>& out) {
  int ready;
  do {
    timespec left = TimeLeft(deadline_ns);
    ready = ppoll(wake_fds_.data(), wake_fds_.size(),
                  deadline_ns == kNoDeadline ? nullptr : &left, nullptr);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return -errno;

  int appended = 0;
  int error = 0;
  for (size_t i = 0; i < wake_fds_.size() && ready > 0; ++i) {
    const short revents = wake_fds_[i].revents;
    if (revents == 0) continue;
    --ready;
    // A descriptor that is closed, at end of file or failing would make every
    // poll() return at once: report that as an engine failure, not a spin.
    if (revents & POLLNVAL) {
      error = -EBADF;
      continue;
    }
    uint64_t counter;
    ssize_t n;
    do {
      n = read(wake_fds_[i].fd, &counter, sizeof(counter));
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      out.push_back(IoCompletion{wake_tags_[i], 0, true});
      ++appended;
    } else if (n == 0) {
      error = -EPIPE;
    } else if (errno != EAGAIN) {
      error = -errno;
    }
    // EAGAIN: someone else cleared the counter first; nothing to report.
  }
  return appended > 0 ? appended : error;
}

}  // namespace pvdisk::io
