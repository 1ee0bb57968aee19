#include "io/write_log_replay.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "io/write_log_format.h"

namespace pvdisk::io {
namespace {

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

absl::Status PwriteAll(int fd, const uint8_t* data, size_t size,
                       uint64_t offset, const std::string& path) {
  while (size > 0) {
    const ssize_t n = pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return ErrnoError(n < 0 ? errno : EIO,
                        absl::StrCat("cannot write ", path));
    }
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status PreadAll(int fd, uint8_t* data, size_t size, uint64_t offset,
                      const std::string& path) {
  while (size > 0) {
    const ssize_t n = pread(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return ErrnoError(n < 0 ? errno : EIO,
                        absl::StrCat("cannot read the log ", path));
    }
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReplayWriteLog(const std::string& log_path,
                            const WriteLogIndex& index, uint64_t count,
                            const std::string& image_path) {
  count = std::min<uint64_t>(count, index.entries.size());
  const int image = open(image_path.c_str(), O_RDWR | O_CLOEXEC);
  if (image < 0) {
    return ErrnoError(errno, absl::StrCat("cannot open ", image_path));
  }
  FdCloser image_closer(image);
  struct stat st;
  if (fstat(image, &st) != 0) {
    return ErrnoError(errno, absl::StrCat("cannot stat ", image_path));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t s = index.sector_size;
  for (uint64_t i = 0; i < count; ++i) {
    const WriteLogRecord& entry = index.entries[i];
    if (entry.flags & (kLogMark | kLogFlush) && entry.nr_sectors == 0) {
      continue;
    }
    if (entry.sector * s + entry.nr_sectors * s > size) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", i, " of ", log_path, " (sectors ",
                       entry.sector, "+", entry.nr_sectors, " of ", s,
                       " bytes) lies beyond ", image_path, "'s ", size,
                       " bytes; replay onto a copy of the image the log "
                       "was taken of"));
    }
  }
  const int log = open(log_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (log < 0) {
    return ErrnoError(errno, absl::StrCat("cannot open the log ", log_path));
  }
  FdCloser log_closer(log);
  std::vector<uint8_t> buffer(1 << 20);
  for (uint64_t i = 0; i < count; ++i) {
    const WriteLogRecord& entry = index.entries[i];
    const uint64_t offset = entry.sector * s;
    if (entry.flags & kLogDiscard) {
      const uint64_t length = entry.nr_sectors * s;
      if (length == 0) continue;
      if (fallocate(image, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(offset),
                    static_cast<off_t>(length)) == 0) {
        continue;
      }
      std::fill(buffer.begin(), buffer.end(), 0);
      for (uint64_t done = 0; done < length;) {
        const size_t piece = static_cast<size_t>(
            std::min<uint64_t>(buffer.size(), length - done));
        if (absl::Status written = PwriteAll(image, buffer.data(), piece,
                                             offset + done, image_path);
            !written.ok()) {
          return written;
        }
        done += piece;
      }
      continue;
    }
    for (uint64_t done = 0; done < entry.data_bytes;) {
      const size_t piece = static_cast<size_t>(
          std::min<uint64_t>(buffer.size(), entry.data_bytes - done));
      if (absl::Status read = PreadAll(log, buffer.data(), piece,
                                       entry.data_offset + done, log_path);
          !read.ok()) {
        return read;
      }
      if (absl::Status written =
              PwriteAll(image, buffer.data(), piece, offset + done, image_path);
          !written.ok()) {
        return written;
      }
      done += piece;
    }
  }
  if (fdatasync(image) != 0) {
    return ErrnoError(errno, absl::StrCat("fdatasync of ", image_path));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::io
