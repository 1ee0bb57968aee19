#include "io/write_log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/log.h"
#include "io/write_log_format.h"

namespace pvdisk::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the log's numbers are written as they lie in memory");

constexpr uint64_t kSector = kWriteLogSectorSize;
constexpr char kEndMark[] = "dm-log-writes-end";

// Zeros to pad a write's data to whole sectors.
const uint8_t kZeros[kSector] = {};

// Writes all of `iov` at `offset`, in pieces of at most IOV_MAX iovecs and
// again after short writes. Returns 0 or a negative errno. Modifies `iov`.
int PwritevAll(int fd, uint64_t offset, iovec* iov, int count) {
  while (count > 0) {
    const ssize_t n =
        pwritev(fd, iov, std::min(count, IOV_MAX), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return -EIO;
    offset += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<WriteLog>> WriteLog::Create(
    const std::string& path) {
  auto cannot = [&path](int error, const std::string& why) {
    return ErrnoError(error,
                      absl::StrCat("cannot write the write log ", path, why));
  };
  struct stat st = {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return cannot(EISDIR, "");
  }
  const size_t slash = path.rfind('/');
  const std::string folder =
      slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string base =
      slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temp = absl::StrCat(slash == std::string::npos ? "" : folder, ".",
                                  base, ".pvdisk-XXXXXX");
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    return cannot(errno, absl::StrCat(": no new file can be made in ", folder));
  }
  fchmod(fd, 0644);  // as a file made by open(2) under the usual umask
  std::shared_ptr<WriteLog> log(new WriteLog(path, temp, fd));
  std::lock_guard<std::mutex> lock(log->mu_);
  if (const int rc = log->WriteSuperLocked(); rc < 0) {
    return cannot(-rc, "");  // the log's destructor removes the file
  }
  log->end_ = kSector;
  return log;
}

absl::Status WriteLog::Publish() {
  if (published_.load(std::memory_order_acquire)) return absl::OkStatus();
  if (rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("the write log ", temp_path_,
                                          " cannot be renamed to ", path_));
  }
  published_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

WriteLog::WriteLog(std::string path, std::string temp_path, int fd)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

WriteLog::~WriteLog() {
  const bool published = published_.load(std::memory_order_acquire);
  if (published) {
    if (absl::Status closed = Close(); !closed.ok()) {
      LogInfo("%s", closed.message());
    }
  }
  close(fd_);
  // Never published: the disk never served, and nothing of it is left.
  if (!published) unlink(temp_path_.c_str());
}

int WriteLog::WriteSuperLocked() {
  uint8_t sector[kSector] = {};
  WriteLogSuper super{kWriteLogMagic, kWriteLogVersion, nr_entries_,
                      kWriteLogSectorSize};
  std::memcpy(sector, &super, sizeof(super));
  iovec iov{sector, sizeof(sector)};
  return PwritevAll(fd_, 0, &iov, 1);
}

void WriteLog::FailLocked(int error, const char* what) {
  if (!failed_.empty()) return;
  failed_ = absl::StrCat(what, " of the write log ", path_,
                         " failed: ", std::strerror(error),
                         "; logging stopped after ", nr_entries_, " entries");
  LogInfo("%s", failed_);
}

int WriteLog::AppendLocked(uint64_t sector, uint64_t nr_sectors, uint64_t flags,
                           std::string_view mark, const iovec* data,
                           int data_count) {
  if (closed_ || !failed_.empty()) return -EIO;
  uint8_t header[kSector] = {};
  WriteLogEntry entry{sector, nr_sectors, flags, mark.size()};
  std::memcpy(header, &entry, sizeof(entry));
  std::memcpy(header + sizeof(entry), mark.data(), mark.size());
  // The header, the data, and zeros up to a whole sector.
  constexpr int kOnStack = 64;
  iovec stack[kOnStack];
  std::vector<iovec> heap;
  iovec* iov = stack;
  if (data_count + 2 > kOnStack) {
    heap.resize(static_cast<size_t>(data_count) + 2);
    iov = heap.data();
  }
  int count = 0;
  iov[count++] = iovec{header, sizeof(header)};
  uint64_t data_bytes = 0;
  for (int i = 0; i < data_count; ++i) {
    iov[count++] = data[i];
    data_bytes += data[i].iov_len;
  }
  if (const uint64_t tail = data_bytes % kSector; tail != 0) {
    iov[count++] = iovec{const_cast<uint8_t*>(kZeros), kSector - tail};
    data_bytes += kSector - tail;
  }
  const uint64_t bytes = kSector + data_bytes;
  if (const int rc = PwritevAll(fd_, end_, iov, count); rc < 0) {
    FailLocked(-rc, "an append");
    return rc;
  }
  end_ += bytes;
  ++nr_entries_;
  entries_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return 0;
}

int WriteLog::AppendWrite(uint64_t offset, const iovec* iov, int iov_count,
                          uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  return AppendLocked(offset / kSector, (length + kSector - 1) / kSector, 0, {},
                      iov, iov_count);
}

int WriteLog::AppendDiscard(uint64_t offset, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  return AppendLocked(offset / kSector, length / kSector, kLogDiscard, {},
                      nullptr, 0);
}

int WriteLog::AppendFlush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (const int rc = AppendLocked(0, 0, kLogFlush, {}, nullptr, 0); rc < 0) {
    return rc;
  }
  if (const int rc = WriteSuperLocked(); rc < 0) {
    FailLocked(-rc, "the superblock's update");
    return rc;
  }
  return 0;
}

absl::Status WriteLog::AppendMark(std::string_view name) {
  if (name.empty() || name.size() > kMaxMarkLength ||
      std::any_of(name.begin(), name.end(),
                  [](char c) { return c <= ' ' || c > '~'; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a mark's name is 1 to ", kMaxMarkLength,
        " printable characters without spaces, not '", std::string(name), "'"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.empty()) return absl::FailedPreconditionError(failed_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the write log ", path_, " is closed"));
  }
  if (int rc = AppendLocked(0, 0, kLogMark, name, nullptr, 0);
      rc < 0 || (rc = WriteSuperLocked()) < 0) {
    FailLocked(-rc, "a mark");
    return ErrnoError(-rc, absl::StrCat("cannot write the write log ", path_));
  }
  return absl::OkStatus();
}

absl::Status WriteLog::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return absl::OkStatus();
  if (failed_.empty()) {
    if (int rc = AppendLocked(0, 0, kLogMark, kEndMark, nullptr, 0);
        rc < 0 || (rc = WriteSuperLocked()) < 0) {
      FailLocked(-rc, "the end");
    }
  }
  closed_ = true;
  if (fdatasync(fd_) != 0) {
    return ErrnoError(errno,
                      absl::StrCat("fdatasync of the write log ", path_));
  }
  if (!failed_.empty()) return absl::DataLossError(failed_);
  return absl::OkStatus();
}

WriteLogCounts WriteLog::counts() const {
  return WriteLogCounts{entries_.load(std::memory_order_relaxed),
                        bytes_.load(std::memory_order_relaxed)};
}

void WriteLog::ResetCounts() {
  entries_.store(0, std::memory_order_relaxed);
  bytes_.store(0, std::memory_order_relaxed);
}

std::string WriteLog::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

}  // namespace pvdisk::io
