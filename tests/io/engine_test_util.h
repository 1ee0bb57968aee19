// Shared fixture pieces for the engine tests: a real image file, an engine
// over it, and helpers to submit requests and collect their completions.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {

inline constexpr uint64_t kImageBytes = 1 << 20;

// True when `status` says io_uring is missing or forbidden here (ENOSYS,
// EPERM), the one case where uring tests skip instead of failing.
inline bool IoUringUnavailable(const absl::Status& status) {
  return absl::IsUnimplemented(status) || absl::IsPermissionDenied(status);
}

// Calls Run(wait=true) until `count` I/O completions have arrived (wake-ups
// are dropped) and returns them. Fails the test if Run errs or stalls.
inline std::vector<IoCompletion> Collect(IoEngine& engine, size_t count) {
  std::vector<IoCompletion> io;
  std::vector<IoCompletion> batch;
  for (int rounds = 0; io.size() < count && rounds < 100000; ++rounds) {
    batch.clear();
    int n = engine.Run(/*wait=*/true, batch);
    EXPECT_GE(n, 0);
    if (n < 0) break;
    EXPECT_EQ(static_cast<size_t>(n), batch.size());
    for (const IoCompletion& c : batch) {
      if (!c.wake) io.push_back(c);
    }
  }
  EXPECT_EQ(io.size(), count);
  return io;
}

// Queues one request and returns its completion result.
inline int64_t Do(IoEngine& engine, const IoRequest& request) {
  int rc = engine.Queue(request);
  EXPECT_EQ(rc, 0);
  if (rc != 0) return rc;
  std::vector<IoCompletion> done = Collect(engine, 1);
  if (done.size() != 1) return -1000;
  EXPECT_EQ(done[0].tag, request.tag);
  return done[0].result;
}

inline IoRequest Rw(IoOp op, uint64_t offset, const std::vector<iovec>& iov,
                    uint64_t tag = 1) {
  uint64_t length = 0;
  for (const iovec& v : iov) length += v.iov_len;
  return IoRequest{.op = op,
                   .offset = offset,
                   .length = length,
                   .iov = iov.data(),
                   .iov_count = static_cast<int>(iov.size()),
                   .tag = tag};
}

inline IoRequest Range(IoOp op, uint64_t offset, uint64_t length,
                       uint64_t tag = 1) {
  return IoRequest{.op = op, .offset = offset, .length = length, .tag = tag};
}

// A 1 MiB image (opened with O_DIRECT when the filesystem allows) and an
// engine of the test's kind over it.
class EngineFixture {
 protected:
  // Sets up `image_` and `engine_`; sets `skip_reason` instead when io_uring
  // is unavailable for a uring engine.
  void SetUpEngine(EngineOptions options, std::string& skip_reason) {
    image_path_ = dir_.File("disk.img");
    ASSERT_TRUE(CreateImage(image_path_, kImageBytes, false).ok());
    auto image = ImageFile::Open(image_path_, /*read_only=*/false,
                                 /*want_direct=*/true);
    ASSERT_TRUE(image.ok()) << image.status();
    image_ = *std::move(image);
    auto engine = CreateEngine(options, *image_);
    if (!engine.ok() && IoUringUnavailable(engine.status())) {
      skip_reason = engine.status().ToString();
      return;
    }
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  TempDir dir_;
  std::string image_path_;
  std::unique_ptr<ImageFile> image_;
  std::unique_ptr<IoEngine> engine_;
};

}  // namespace pvdisk::io::testing
