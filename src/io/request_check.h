// Validation shared by the engines: which requests they accept at all.
#pragma once

#include <sys/uio.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "io/io_engine.h"

namespace pvdisk::io {

// Returns 0 when `request` is well formed for an image of `image_bytes`, or
// -EINVAL: kRead/kWrite need 1..kMaxIovecs iovecs whose lengths add up to
// `length`; every op but kFlush needs a non-empty range inside the image.
// Hot path: a loop over the iovecs and a few compares, no system calls.
inline int CheckRequest(const IoRequest& request, uint64_t image_bytes) {
  switch (request.op) {
    case IoOp::kFlush:
      return 0;
    case IoOp::kRead:
    case IoOp::kWrite: {
      if (request.iov == nullptr || request.iov_count <= 0 ||
          request.iov_count > kMaxIovecs) {
        return -EINVAL;
      }
      uint64_t total = 0;
      for (int i = 0; i < request.iov_count; ++i) {
        total += request.iov[i].iov_len;
      }
      if (total != request.length) return -EINVAL;
      break;
    }
    case IoOp::kDiscard:
    case IoOp::kWriteZeroes:
      break;
    default:
      return -EINVAL;
  }
  if (request.length == 0 || request.offset > image_bytes ||
      request.length > image_bytes - request.offset) {
    return -EINVAL;
  }
  return 0;
}

// For an engine over `file_count` files whose sizes are `file_bytes`: -EINVAL
// also when request.file names none of them; else CheckRequest against the
// size of the file it names.
inline int CheckRequest(const IoRequest& request, const uint64_t* file_bytes,
                        size_t file_count) {
  if (request.file >= file_count) return -EINVAL;
  return CheckRequest(request, file_bytes[request.file]);
}

}  // namespace pvdisk::io
