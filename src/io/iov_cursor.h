// A private copy of an iovec array that can skip bytes already transferred,
// used to resubmit the rest of a request after a short read or write.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pvdisk::io {

class IovCursor {
 public:
  // Copies `iov[0..count)` and drops its first `skip` bytes. Reuses the
  // storage of earlier calls, so after warm-up it does not allocate.
  void Reset(const iovec* iov, int count, uint64_t skip) {
    iov_.assign(iov, iov + count);
    first_ = 0;
    while (first_ < iov_.size() && skip >= iov_[first_].iov_len) {
      skip -= iov_[first_].iov_len;
      ++first_;
    }
    if (first_ < iov_.size() && skip > 0) {
      iov_[first_].iov_base = static_cast<char*>(iov_[first_].iov_base) + skip;
      iov_[first_].iov_len -= skip;
    }
  }

  // The remaining iovecs; valid until the next Reset().
  const iovec* data() const { return iov_.data() + first_; }
  int count() const { return static_cast<int>(iov_.size() - first_); }

 private:
  std::vector<iovec> iov_;
  size_t first_ = 0;
};

}  // namespace pvdisk::io
