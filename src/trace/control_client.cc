#include "trace/control_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "trace/trace_control.h"

namespace pvdisk::trace {
namespace {

// Bytes asked for per read: the kernel cuts it into FUSE READs of at most
// the mount's max_read, each answered with whole events.
constexpr size_t kReadBytes = size_t{1} << 20;

}  // namespace

absl::StatusOr<ControlClient> ControlClient::Start(
    const std::string& mountpoint, const std::string& disk, TraceScope scope) {
  std::string path = absl::StrCat(mountpoint, "/", kTraceName);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open ", path, ": ", std::strerror(errno),
        " (the daemon must be a pvdisk that can trace, and yours)"));
  }
  ControlClient client(fd);
  std::string command =
      absl::StrCat(scope == TraceScope::kBlock ? "block " : "all ", disk);
  ssize_t written = write(fd, command.data(), command.size());
  if (written < 0) {
    int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("no disk named '", disk, "' in ", mountpoint));
    }
    if (error == EBUSY) {
      return absl::FailedPreconditionError(
          absl::StrCat(disk,
                       " is being traced already (one pvdisk trace per "
                       "disk at a time)"));
    }
    return absl::UnavailableError(absl::StrCat(
        "starting the trace of ", disk, " failed: ", std::strerror(error)));
  }
  return client;
}

ControlClient::ControlClient(int fd) : fd_(fd), buffer_(kReadBytes) {}

ControlClient::ControlClient(ControlClient&& other) noexcept
    : fd_(other.fd_), buffer_(std::move(other.buffer_)) {
  other.fd_ = -1;
}

ControlClient::~ControlClient() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<size_t> ControlClient::Read(std::vector<TraceEvent>* out) {
  ssize_t got;
  do {
    got = read(fd_, buffer_.data(), buffer_.size());
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    return absl::UnavailableError(
        absl::StrCat("reading the trace failed: ", std::strerror(errno)));
  }
  // Each FUSE READ is answered with whole events, so a read is too.
  size_t events = static_cast<size_t>(got) / sizeof(TraceEvent);
  size_t before = out->size();
  out->resize(before + events);
  std::memcpy(out->data() + before, buffer_.data(),
              events * sizeof(TraceEvent));
  return events;
}

}  // namespace pvdisk::trace
