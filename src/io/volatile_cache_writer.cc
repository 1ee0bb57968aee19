#include "io/volatile_cache_writer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>

#include "absl/strings/str_cat.h"

namespace pvdisk::io {
namespace {

// The most buffers one write carries (well under IOV_MAX).
constexpr size_t kMaxOpIov = 256;

// Errors after which a write or a submission is simply tried again.
bool Transient(int rc) { return rc == -EINTR || rc == -EAGAIN || rc == -EBUSY; }

}  // namespace

CacheWriter::CacheWriter(int fd) : fd_(fd) {
  const int flags = fcntl(fd, F_GETFL);
  direct_ = flags >= 0 && (flags & O_DIRECT) != 0;
  if (!direct_) buffered_fd_ = fd_;
  // Any thread may submit (the cache hands the writer from its write-out
  // thread to a power cut's): no IORING_SETUP_SINGLE_ISSUER.
  ring_ok_ = io_uring_queue_init(kCacheWriterDepth, &ring_, 0) == 0;
}

CacheWriter::~CacheWriter() {
  if (ring_ok_) io_uring_queue_exit(&ring_);
  if (buffered_fd_ >= 0 && buffered_fd_ != fd_) close(buffered_fd_);
}

bool CacheWriter::DirectAligned(const Piece& piece) const {
  constexpr uint64_t kMask = kCacheWriterDirectAlign - 1;
  return ((piece.offset | piece.length |
           reinterpret_cast<uintptr_t>(piece.data)) &
          kMask) == 0;
}

int CacheWriter::BufferedFd() {
  if (buffered_fd_ >= 0) return buffered_fd_;
  // The same file, a description of its own without O_DIRECT.
  const std::string self = absl::StrCat("/proc/self/fd/", fd_);
  const int fd = open(self.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  buffered_fd_ = fd;
  return fd;
}

int CacheWriter::Write(const std::vector<Piece>& pieces) {
  std::vector<Piece> buffered;
  ops_.clear();
  iov_.clear();
  if (!direct_) {
    Plan(pieces, false);
    return Run(fd_, nullptr);
  }
  std::vector<Piece> direct;
  direct.reserve(pieces.size());
  for (const Piece& piece : pieces) {
    (DirectAligned(piece) ? direct : buffered).push_back(piece);
  }
  Plan(direct, true);
  if (const int rc = Run(fd_, &buffered); rc < 0) return rc;
  if (buffered.empty()) return 0;
  // Only now, with no direct write in flight (see the header).
  const int fd = BufferedFd();
  if (fd < 0) return fd;
  buffered_pieces_ += buffered.size();
  ops_.clear();
  iov_.clear();
  std::sort(buffered.begin(), buffered.end(),
            [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  Plan(buffered, false);
  return Run(fd, nullptr);
}

void CacheWriter::Plan(const std::vector<Piece>& pieces, bool direct) {
  uint64_t op_bytes = 0;
  for (const Piece& piece : pieces) {
    for (uint64_t done = 0; done < piece.length;) {
      const uint64_t chunk = std::min(piece.length - done, kCacheWriterOpBytes);
      const uint64_t at = piece.offset + done;
      const bool joins = !ops_.empty() && ops_.back().offset + op_bytes == at &&
                         op_bytes + chunk <= kCacheWriterOpBytes &&
                         ops_.back().end - ops_.back().first < kMaxOpIov;
      if (!joins) {
        ops_.push_back(Op{at, iov_.size(), iov_.size(), direct});
        op_bytes = 0;
      }
      iov_.push_back(iovec{const_cast<uint8_t*>(piece.data + done),
                           static_cast<size_t>(chunk)});
      ++ops_.back().end;
      op_bytes += chunk;
      done += chunk;
    }
  }
}

bool CacheWriter::Advance(Op& op, uint64_t done) {
  op.offset += done;
  while (op.first < op.end && done >= iov_[op.first].iov_len) {
    done -= iov_[op.first].iov_len;
    ++op.first;
  }
  if (op.first < op.end && done > 0) {
    iovec& rest = iov_[op.first];
    rest.iov_base = static_cast<uint8_t*>(rest.iov_base) + done;
    rest.iov_len -= done;
  }
  return op.first == op.end;
}

void CacheWriter::Refuse(const Op& op, std::vector<Piece>* refused) const {
  uint64_t offset = op.offset;
  for (size_t i = op.first; i < op.end; ++i) {
    refused->push_back(Piece{offset,
                             static_cast<const uint8_t*>(iov_[i].iov_base),
                             iov_[i].iov_len});
    offset += iov_[i].iov_len;
  }
}

int CacheWriter::Run(int fd, std::vector<Piece>* refused) {
  if (ops_.empty()) return 0;
  return ring_ok_ ? RunOnRing(fd, refused) : RunSync(fd, refused);
}

int CacheWriter::RunOnRing(int fd, std::vector<Piece>* refused) {
  // The queue holds kCacheWriterDepth entries and is empty after each
  // submission; at most that many writes are in flight, so a completion's
  // resubmission always finds an entry.
  auto prepare = [&](size_t i) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    const Op& op = ops_[i];
    io_uring_prep_writev(sqe, fd, &iov_[op.first],
                         static_cast<unsigned>(op.end - op.first), op.offset);
    io_uring_sqe_set_data64(sqe, i);
  };
  size_t next = 0;
  unsigned inflight = 0;
  int error = 0;
  for (;;) {
    while (error == 0 && next < ops_.size() && inflight < kCacheWriterDepth) {
      prepare(next++);
      ++inflight;
    }
    if (inflight == 0) break;
    if (const int rc = io_uring_submit_and_wait(&ring_, 1); rc < 0) {
      if (Transient(rc)) continue;
      // Not on a ring set up here: the writes prepared cannot be told from
      // the ones in flight, so the ring is given up and so is the cache.
      ring_ok_ = false;
      return rc;
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      Op& op = ops_[i];
      const int res = cqe->res;
      if (Transient(res) && error == 0) {
        prepare(i);
        continue;
      }
      if (res < 0) {
        if (res == -EINVAL && op.direct && refused != nullptr) {
          Refuse(op, refused);
        } else if (error == 0) {
          error = res;
        }
      } else if (res == 0) {
        if (error == 0) error = -EIO;
      } else if (!Advance(op, static_cast<uint64_t>(res)) && error == 0) {
        prepare(i);  // a short write: the rest
        continue;
      }
      --inflight;
    }
    io_uring_cq_advance(&ring_, seen);
  }
  return error;
}

int CacheWriter::RunSync(int fd, std::vector<Piece>* refused) {
  for (Op& op : ops_) {
    for (;;) {
      const int count =
          static_cast<int>(std::min<size_t>(op.end - op.first, IOV_MAX));
      const ssize_t n =
          pwritev(fd, &iov_[op.first], count, static_cast<off_t>(op.offset));
      if (n < 0) {
        const int rc = -errno;
        if (Transient(rc)) continue;
        if (rc == -EINVAL && op.direct && refused != nullptr) {
          Refuse(op, refused);
          break;
        }
        return rc;
      }
      if (n == 0) return -EIO;
      if (Advance(op, static_cast<uint64_t>(n))) break;
    }
  }
  return 0;
}

int CacheWriter::Sync() {
  if (!ring_ok_) {
    while (fdatasync(fd_) != 0) {
      if (errno != EINTR) return -errno;
    }
    return 0;
  }
  for (;;) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC);
    int rc;
    do {
      rc = io_uring_submit_and_wait(&ring_, 1);
    } while (Transient(rc));
    io_uring_cqe* cqe = nullptr;
    if (rc >= 0) {
      do {
        rc = io_uring_wait_cqe(&ring_, &cqe);
      } while (Transient(rc));
    }
    if (rc < 0) {
      ring_ok_ = false;
      return rc;
    }
    rc = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (!Transient(rc)) return rc < 0 ? rc : 0;
  }
}

}  // namespace pvdisk::io
