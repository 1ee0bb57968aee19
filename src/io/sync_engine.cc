#include "io/sync_engine.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "io/immediate_engine.h"
#include "io/iov_cursor.h"

namespace pvdisk::io {
namespace {

constexpr int kPunchHole = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
constexpr int kZeroRange = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;

class SyncEngine final : public ImmediateEngine {
 public:
  SyncEngine(const EngineFiles& files, uint32_t capacity)
      : ImmediateEngine(FileSizes(files), capacity),
        mode_(files[0]->direct_note()) {
    fds_.reserve(files.size());
    for (const ImageFile* file : files) fds_.push_back(file->fd());
  }

  std::string_view name() const override { return "sync"; }
  std::string_view mode() const override { return mode_; }

 private:
  int64_t Perform(const IoRequest& request) override {
    switch (request.op) {
      case IoOp::kRead:
      case IoOp::kWrite:
        return Transfer(request);
      case IoOp::kFlush:
        while (fdatasync(fds_[request.file]) != 0) {
          if (errno != EINTR) return -errno;
        }
        return 0;
      case IoOp::kDiscard:
        return Fallocate(kPunchHole, request);
      case IoOp::kWriteZeroes:
        if (!zero_range_unsupported_) {
          int64_t result = Fallocate(kZeroRange, request);
          if (result != -EOPNOTSUPP) return result;
          // Remember, so later requests go straight to punching holes, which
          // also reads back as zeros (but frees the space).
          zero_range_unsupported_ = true;
        }
        return Fallocate(kPunchHole, request);
    }
    return -EINVAL;
  }

  // Reads or writes the whole request, continuing after short transfers.
  int64_t Transfer(const IoRequest& request) {
    const bool read = request.op == IoOp::kRead;
    const int fd = fds_[request.file];
    const iovec* iov = request.iov;
    int count = request.iov_count;
    uint64_t done = 0;
    for (;;) {
      const off_t offset = static_cast<off_t>(request.offset + done);
      ssize_t n = read ? preadv(fd, iov, count, offset)
                       : pwritev(fd, iov, count, offset);
      if (n < 0) {
        if (errno == EINTR) continue;
        return -errno;
      }
      // No progress: end of file on a read (the image shrank under us), or a
      // write the filesystem will not take. Retrying would spin.
      if (n == 0) return -EIO;
      done += static_cast<uint64_t>(n);
      if (done >= request.length) return static_cast<int64_t>(request.length);
      cursor_.Reset(request.iov, request.iov_count, done);
      iov = cursor_.data();
      count = cursor_.count();
    }
  }

  int64_t Fallocate(int mode, const IoRequest& request) {
    while (fallocate(fds_[request.file], mode,
                     static_cast<off_t>(request.offset),
                     static_cast<off_t>(request.length)) != 0) {
      if (errno != EINTR) return -errno;
    }
    return static_cast<int64_t>(request.length);
  }

  std::vector<int> fds_;  // by IoRequest::file
  const std::string mode_;
  bool zero_range_unsupported_ = false;
  IovCursor cursor_;  // the rest of a request after a short transfer
};

}  // namespace

std::unique_ptr<IoEngine> CreateSyncEngine(const EngineFiles& files,
                                           const EngineOptions& options) {
  return std::make_unique<SyncEngine>(files, options.depth + options.extra_ios);
}

}  // namespace pvdisk::io
