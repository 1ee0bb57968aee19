// The fault decorator fails I/O on its sector range with -EIO, leaves the
// image alone there, and passes everything else through.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

// Sectors 8..15: bytes [4096, 8192).
constexpr FaultRange kFault = {8, 8};

class FaultEngineTest : public EngineFixture,
                        public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.kind = GetParam();
    options.depth = 16;
    options.fault = kFault;
    std::string skip_reason;
    SetUpEngine(options, skip_reason);
    if (!skip_reason.empty()) GTEST_SKIP() << skip_reason;
  }
};

TEST_P(FaultEngineTest, FailsTheRangeAndLeavesItUntouched) {
  AlignedBuffer data(4096);
  std::memset(data.data(), 'A', data.size());
  std::vector<iovec> iov = {{data.data(), data.size()}};

  // Writes overlapping the range by one sector at either end, or inside it.
  for (uint64_t offset : {uint64_t{512}, uint64_t{4096}, uint64_t{7680}}) {
    EXPECT_EQ(Do(*engine_, Rw(IoOp::kWrite, offset, iov)), -EIO) << offset;
  }
  EXPECT_EQ(Do(*engine_, Range(IoOp::kDiscard, 6144, 512)), -EIO);
  EXPECT_EQ(Do(*engine_, Range(IoOp::kWriteZeroes, 0, 8192)), -EIO);
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, 4096, iov)), -EIO);
  EXPECT_EQ(ReadFileRange(image_path_, 0, 12288), std::string(12288, '\0'));

  // Right next to the range on both sides: works.
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kWrite, 0, iov)), 4096);
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kWrite, 8192, iov)), 4096);
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, 8192, iov)), 4096);
  EXPECT_EQ(Do(*engine_, Range(IoOp::kFlush, 0, 0)), 0);
  if (GetParam() != EngineKind::kNull) {
    EXPECT_EQ(ReadFileRange(image_path_, 0, 4096), std::string(4096, 'A'));
    EXPECT_EQ(ReadFileRange(image_path_, 4096, 4096), std::string(4096, '\0'));
    EXPECT_EQ(ReadFileRange(image_path_, 8192, 4096), std::string(4096, 'A'));
  }
  EXPECT_EQ(engine_->inflight(), 0u);
}

TEST_P(FaultEngineTest, FaultsDoNotLetRunBlock) {
  // With a watched eventfd the inner engine could block in Run(wait=true);
  // a pending fault completion must be returned at once instead.
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 3).ok());
  AlignedBuffer data(512);
  std::vector<iovec> iov = {{data.data(), data.size()}};
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096, iov, 77)), 0);
  EXPECT_EQ(engine_->inflight(), 1u);
  std::vector<IoCompletion> out;
  ASSERT_EQ(engine_->Run(/*wait=*/true, out), 1);
  EXPECT_EQ(out[0].tag, 77u);
  EXPECT_EQ(out[0].result, -EIO);
  EXPECT_FALSE(out[0].wake);
  EXPECT_EQ(engine_->inflight(), 0u);
  engine_.reset();
  close(fd);
}

TEST_P(FaultEngineTest, ModeNamesTheRange) {
  EXPECT_EQ(engine_->name(), EngineKindName(GetParam()));
  EXPECT_NE(std::string(engine_->mode()).find("EIO on sectors 8+8"),
            std::string::npos)
      << engine_->mode();
}

INSTANTIATE_TEST_SUITE_P(AllKinds, FaultEngineTest,
                         ::testing::Values(EngineKind::kUring,
                                           EngineKind::kSync,
                                           EngineKind::kNull),
                         [](const ::testing::TestParamInfo<EngineKind>& info) {
                           return std::string(EngineKindName(info.param));
                         });

}  // namespace
}  // namespace pvdisk::io::testing
