// io_uring specifics: the ring belongs to the thread that uses the engine, the
// depth limit, and clean shutdown with reads still armed.
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

class UringEngineTest : public EngineFixture, public ::testing::Test {
 protected:
  void SetUpWithDepth(uint32_t depth) {
    EngineOptions options;
    options.kind = EngineKind::kUring;
    options.depth = depth;
    SetUpEngine(options, skip_reason_);
  }
  std::string skip_reason_;
};

// Made (and told about its eventfd) on one thread, the control thread in
// pvdisk, and used on another, the backend thread: single-issuer rings must
// still work.
TEST_F(UringEngineTest, CreatedOnOneThreadUsedOnAnother) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 9).ok());
  std::thread backend([this, fd] {
    AlignedBuffer out(8192), in(8192);
    for (size_t i = 0; i < out.size(); ++i) {
      out.data()[i] = static_cast<char>(i);
    }
    std::vector<iovec> w = {{out.data(), 4096}, {out.data() + 4096, 4096}};
    EXPECT_EQ(Do(*engine_, Rw(IoOp::kWrite, 4096, w)), 8192);
    std::vector<iovec> r = {{in.data(), 8192}};
    EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, 4096, r)), 8192);
    EXPECT_EQ(in.str(), out.str());

    uint64_t one = 1;
    EXPECT_EQ(write(fd, &one, sizeof(one)), 8);
    std::vector<IoCompletion> wake;
    EXPECT_EQ(engine_->Run(/*wait=*/true, wake), 1);
    EXPECT_TRUE(!wake.empty() && wake[0].wake && wake[0].tag == 9);
    engine_.reset();  // destroyed on the thread that used it
  });
  backend.join();
  close(fd);
}

TEST_F(UringEngineTest, RefusesMoreThanDepth) {
  SetUpWithDepth(4);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  AlignedBuffer buffer(4096 * 5);
  std::vector<std::vector<iovec>> iovs(5);
  for (int i = 0; i < 5; ++i) {
    iovs[i] = {{buffer.data() + 4096 * i, 4096}};
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096 * i, iovs[i], i)), 0);
  }
  EXPECT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096 * 4, iovs[4], 4)), -EBUSY);
  EXPECT_EQ(engine_->inflight(), 4u);
  Collect(*engine_, 4);
  EXPECT_EQ(engine_->inflight(), 0u);
  // The slots are free again.
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096 * 4, iovs[4], 4)), 0);
  Collect(*engine_, 1);
}

TEST_F(UringEngineTest, DestroysPromptlyWithWakeReadArmed) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  int fd = eventfd(0, EFD_CLOEXEC);  // blocking, too
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 1).ok());
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/false, out), 0);  // arms the read
  const auto start = std::chrono::steady_clock::now();
  engine_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500));
  // The cancelled read did not take the counter.
  uint64_t one = 1;
  EXPECT_EQ(write(fd, &one, sizeof(one)), 8);
  uint64_t counter = 0;
  EXPECT_EQ(read(fd, &counter, sizeof(counter)), 8);
  EXPECT_EQ(counter, 1u);
  close(fd);
}

TEST_F(UringEngineTest, WaitingWithNothingToWaitForReturns) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/true, out), 0);
}

}  // namespace
}  // namespace pvdisk::io::testing
