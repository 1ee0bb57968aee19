#include "io/write_log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
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

// Writes the superblock of a log of `nr_entries` entries. 0 or -errno.
int WriteSuperblock(int fd, uint64_t nr_entries) {
  uint8_t sector[kSector] = {};
  WriteLogSuper super{kWriteLogMagic, kWriteLogVersion, nr_entries,
                      kWriteLogSectorSize};
  std::memcpy(sector, &super, sizeof(super));
  iovec iov{sector, sizeof(sector)};
  return PwritevAll(fd, 0, &iov, 1);
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
  const int rc = WriteSuperblock(fd, 0);
  // Owns the file from here: removes it unless published.
  std::shared_ptr<WriteLog> log(new WriteLog(path, temp, fd));
  if (rc < 0) return cannot(-rc, "");
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

void WriteLog::HandOff() {
  handed_off_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

absl::StatusOr<std::shared_ptr<WriteLog>> WriteLog::Adopt(int fd,
                                                          std::string path) {
  // Checked before the log owns `fd`: a log object would write its end
  // mark over a file that is not its own.
  struct stat st = {};
  WriteLogSuper super = {};
  if (fstat(fd, &st) != 0 ||
      pread(fd, &super, sizeof(super), 0) != sizeof(super)) {
    const int error = errno;
    close(fd);
    return ErrnoError(error, absl::StrCat("cannot read the write log ", path));
  }
  if (super.magic != kWriteLogMagic || super.nr_entries != 0 ||
      static_cast<uint64_t>(st.st_size) != kSector) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("the write log ", path, " is not a new, empty log"));
  }
  // Published: closed with its end mark, never removed.
  std::shared_ptr<WriteLog> log(new WriteLog(path, std::string(), fd));
  log->published_.store(true, std::memory_order_release);
  log->end_ = kSector;
  return log;
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

void WriteLog::FailLocked(int error, const char* what) {
  if (!failed_.empty()) return;
  failed_ = absl::StrCat(what, " of the write log ", path_,
                         " failed: ", std::strerror(error),
                         "; logging stopped after ",
                         std::min(failed_seq_, nr_entries_), " entries");
  LogInfo("%s", failed_);
}

int WriteLog::Append(uint64_t sector, uint64_t nr_sectors, uint64_t flags,
                     std::string_view mark, const iovec* data, int data_count,
                     uint64_t* seq, bool closing) {
  uint64_t data_bytes = 0;
  for (int i = 0; i < data_count; ++i) data_bytes += data[i].iov_len;
  const uint64_t bytes =
      kSector + (data_bytes + kSector - 1) / kSector * kSector;
  Slot slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if ((closed_ && !closing) || !failed_.empty()) return -EIO;
    slot = Slot{nr_entries_++, end_};
    end_ += bytes;
    writing_.insert(slot.seq);
  }
  uint8_t header[kSector] = {};
  WriteLogEntry entry{sector, nr_sectors, flags, mark.size()};
  std::memcpy(header, &entry, sizeof(entry));
  std::memcpy(header + sizeof(entry), mark.data(), mark.size());
  const int rc = WriteEntry(slot, header, data, data_count, data_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  writing_.erase(slot.seq);
  if (rc < 0) {
    failed_seq_ = std::min(failed_seq_, slot.seq);
    FailLocked(-rc, "an append");
  } else {
    entries_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  if (waiters_ > 0) written_cv_.notify_all();
  *seq = slot.seq;
  return rc;
}

int WriteLog::WriteEntry(const Slot& slot, const uint8_t* header,
                         const iovec* data, int data_count,
                         uint64_t data_bytes) {
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
  iov[count++] = iovec{const_cast<uint8_t*>(header), kSector};
  for (int i = 0; i < data_count; ++i) iov[count++] = data[i];
  if (const uint64_t tail = data_bytes % kSector; tail != 0) {
    iov[count++] = iovec{const_cast<uint8_t*>(kZeros), kSector - tail};
  }
  return PwritevAll(fd_, slot.at, iov, count);
}

int WriteLog::UpdateSuper(uint64_t seq) {
  uint64_t count;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiters_;
    written_cv_.wait(
        lock, [&] { return writing_.empty() || *writing_.begin() > seq; });
    --waiters_;
    count = writing_.empty() ? nr_entries_ : *writing_.begin();
    count = std::min(count, failed_seq_);
  }
  std::lock_guard<std::mutex> lock(super_mu_);
  if (count <= super_entries_) return 0;
  if (const int rc = WriteSuperblock(fd_, count); rc < 0) return rc;
  super_entries_ = count;
  return 0;
}

int WriteLog::AppendWrite(uint64_t offset, const iovec* iov, int iov_count,
                          uint64_t length) {
  uint64_t seq;
  return Append(offset / kSector, (length + kSector - 1) / kSector, 0, {}, iov,
                iov_count, &seq);
}

int WriteLog::AppendDiscard(uint64_t offset, uint64_t length) {
  uint64_t seq;
  return Append(offset / kSector, length / kSector, kLogDiscard, {}, nullptr, 0,
                &seq);
}

int WriteLog::AppendFlush() {
  uint64_t seq;
  if (const int rc = Append(0, 0, kLogFlush, {}, nullptr, 0, &seq); rc < 0) {
    return rc;
  }
  if (const int rc = UpdateSuper(seq); rc < 0) {
    std::lock_guard<std::mutex> lock(mu_);
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.empty()) return absl::FailedPreconditionError(failed_);
    if (closed_) {
      return absl::FailedPreconditionError(
          absl::StrCat("the write log ", path_, " is closed"));
    }
  }
  uint64_t seq;
  if (int rc = Append(0, 0, kLogMark, name, nullptr, 0, &seq);
      rc < 0 || (rc = UpdateSuper(seq)) < 0) {
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(-rc, "a mark");
    return ErrnoError(-rc, absl::StrCat("cannot write the write log ", path_));
  }
  return absl::OkStatus();
}

absl::Status WriteLog::Close() {
  if (handed_off_) return absl::OkStatus();
  bool failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;  // no append after the end mark
    failed = !failed_.empty();
  }
  if (!failed) {
    uint64_t seq;
    if (int rc = Append(0, 0, kLogMark, kEndMark, nullptr, 0, &seq, true);
        rc < 0 || (rc = UpdateSuper(seq)) < 0) {
      std::lock_guard<std::mutex> lock(mu_);
      FailLocked(-rc, "the end");
    }
  }
  if (fdatasync(fd_) != 0) {
    return ErrnoError(errno,
                      absl::StrCat("fdatasync of the write log ", path_));
  }
  std::lock_guard<std::mutex> lock(mu_);
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
