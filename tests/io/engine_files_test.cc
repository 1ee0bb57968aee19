// Engines over several files (IoRequest::file) and with room beyond their
// depth (EngineOptions::extra_ios), on two real image files: what a request
// names lands in that file and no other, an index beyond the list and a
// range beyond the named file's size are -EINVAL, and the uring engine
// takes depth + extra_ios requests, refusing the next with -EBUSY.
#include <sys/uio.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"
#include "io/test_fault.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

constexpr uint64_t kTopBytes = 1 << 20;
constexpr uint64_t kBackingBytes = 256 << 10;

class EngineFilesTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    top_path_ = dir_.File("top.img");
    backing_path_ = dir_.File("backing.img");
    ASSERT_TRUE(CreateImage(top_path_, kTopBytes, false).ok());
    ASSERT_TRUE(CreateImage(backing_path_, kBackingBytes, false).ok());
    for (const std::string& path : {top_path_, backing_path_}) {
      auto file = ImageFile::Open(path, /*read_only=*/false,
                                  /*want_direct=*/true);
      ASSERT_TRUE(file.ok()) << file.status();
      files_.push_back(*std::move(file));
    }
  }

  // An engine of the test's kind over both files, top first; null (and
  // skip_ set) where io_uring is unavailable.
  std::unique_ptr<IoEngine> MakeEngine(uint32_t depth, uint32_t extra_ios) {
    EngineOptions options;
    options.kind = GetParam();
    options.depth = depth;
    options.extra_ios = extra_ios;
    auto engine = CreateFileEngine(
        options, EngineFiles{files_[0].get(), files_[1].get()});
    if (!engine.ok() && IoUringUnavailable(engine.status())) {
      skip_ = engine.status().ToString();
      return nullptr;
    }
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  static IoRequest OnFile(IoRequest request, uint16_t file) {
    request.file = file;
    return request;
  }

  TempDir dir_;
  std::string top_path_;
  std::string backing_path_;
  std::vector<std::unique_ptr<ImageFile>> files_;
  std::string skip_;
};

TEST_P(EngineFilesTest, EachIndexReadsAndWritesItsOwnFile) {
  std::unique_ptr<IoEngine> engine = MakeEngine(8, 0);
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  ASSERT_NE(engine, nullptr);
  AlignedBuffer top(8192), backing(8192), back(8192);
  std::memset(top.data(), 'T', top.size());
  std::memset(backing.data(), 'B', backing.size());
  constexpr uint64_t kAt = 64 << 10;
  std::vector<iovec> t = {{top.data(), 8192}};
  std::vector<iovec> b = {{backing.data(), 8192}};
  EXPECT_EQ(Do(*engine, OnFile(Rw(IoOp::kWrite, kAt, t, 1), 0)), 8192);
  EXPECT_EQ(Do(*engine, OnFile(Rw(IoOp::kWrite, kAt, b, 2), 1)), 8192);
  EXPECT_EQ(Do(*engine, OnFile(Range(IoOp::kFlush, 0, 0, 3), 1)), 0);

  // Through the engine, by index.
  std::vector<iovec> r = {{back.data(), 8192}};
  EXPECT_EQ(Do(*engine, OnFile(Rw(IoOp::kRead, kAt, r, 4), 0)), 8192);
  EXPECT_EQ(back.str(), top.str());
  EXPECT_EQ(Do(*engine, OnFile(Rw(IoOp::kRead, kAt, r, 5), 1)), 8192);
  EXPECT_EQ(back.str(), backing.str());

  // And in the files themselves: each holds its own bytes, nothing else.
  EXPECT_EQ(ReadFileRange(top_path_, kAt, 8192), top.str());
  EXPECT_EQ(ReadFileRange(backing_path_, kAt, 8192), backing.str());

  // A discard on file 1 zeroes file 1 only.
  EXPECT_EQ(Do(*engine, OnFile(Range(IoOp::kDiscard, kAt, 4096, 6), 1)), 4096);
  EXPECT_EQ(ReadFileRange(backing_path_, kAt, 4096), std::string(4096, '\0'));
  EXPECT_EQ(ReadFileRange(top_path_, kAt, 4096), std::string(4096, 'T'));
}

TEST_P(EngineFilesTest, AnIndexOrRangeBeyondTheFilesIsInvalid) {
  std::unique_ptr<IoEngine> engine = MakeEngine(8, 0);
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  ASSERT_NE(engine, nullptr);
  AlignedBuffer buffer(4096);
  std::vector<iovec> v = {{buffer.data(), 4096}};
  EXPECT_EQ(engine->Queue(OnFile(Rw(IoOp::kRead, 0, v), 2)), -EINVAL);
  EXPECT_EQ(engine->Queue(OnFile(Range(IoOp::kFlush, 0, 0), 2)), -EINVAL);
  // Within the top file, beyond the smaller backing file.
  EXPECT_EQ(engine->Queue(OnFile(Rw(IoOp::kRead, kBackingBytes, v), 1)),
            -EINVAL);
  EXPECT_EQ(engine->inflight(), 0u);
  EXPECT_EQ(Do(*engine, OnFile(Rw(IoOp::kRead, kBackingBytes, v), 0)), 4096);
}

TEST_P(EngineFilesTest, TakesDepthPlusExtraIos) {
  constexpr uint32_t kDepth = 4;
  constexpr uint32_t kExtra = 3;
  std::unique_ptr<IoEngine> engine = MakeEngine(kDepth, kExtra);
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  ASSERT_NE(engine, nullptr);
  constexpr int kAll = kDepth + kExtra;
  AlignedBuffer buffer(4096 * (kAll + 1));
  std::vector<std::vector<iovec>> iovs(kAll + 1);
  for (int i = 0; i <= kAll; ++i) {
    iovs[i] = {{buffer.data() + 4096 * i, 4096}};
  }
  for (int i = 0; i < kAll; ++i) {
    ASSERT_EQ(engine->Queue(OnFile(Rw(IoOp::kRead, 4096 * i, iovs[i], i),
                                   static_cast<uint16_t>(i % 2))),
              0)
        << i;
  }
  if (GetParam() == EngineKind::kUring) {
    EXPECT_EQ(engine->Queue(Rw(IoOp::kRead, 0, iovs[kAll], kAll)), -EBUSY);
  }
  Collect(*engine, kAll);
  EXPECT_EQ(engine->inflight(), 0u);
}

// Depth plus extra I/Os must fit the deepest engine: one message naming
// both and the limit.
TEST(EngineOptionsTest, DepthPlusExtraIosBeyondTheLimitIsRefused) {
  EngineOptions options;
  options.depth = kMaxEngineDepth - 8;
  options.extra_ios = 8;
  EXPECT_TRUE(CheckEngineOptions(options, 2048, "disk.img").ok());
  options.extra_ios = 9;
  absl::Status refused = CheckEngineOptions(options, 2048, "disk.img");
  ASSERT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  const std::string message(refused.message());
  EXPECT_NE(message.find("engine depth 32744 with 9 extra I/Os for image "
                         "disk.img is out of range"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("at most 32752"), std::string::npos) << message;
}

// The test fan-out decorator (PVDISK_TEST_FAULT=fanout) over an engine
// that completes in Queue(): Run() reports the step from the sector-0 read
// to the data I/O as progress without a completion, and the next Run()
// returns the request.
TEST_P(EngineFilesTest, FanOutReportsProgressWithoutACompletion) {
  if (GetParam() != EngineKind::kSync) GTEST_SKIP() << "sync engine only";
  std::unique_ptr<IoEngine> engine =
      WrapWithTestFanout(MakeEngine(4, 0), /*capacity=*/4);
  AlignedBuffer buffer(4096);
  std::vector<iovec> v = {{buffer.data(), 4096}};
  ASSERT_EQ(engine->Queue(OnFile(Rw(IoOp::kRead, 8192, v, 7), 1)), 0);
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine->Run(/*wait=*/false, out), 1);  // progress
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(engine->inflight(), 1u);
  EXPECT_EQ(engine->Run(/*wait=*/false, out), 1);  // the completion
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 7u);
  EXPECT_EQ(out[0].result, 4096);
  EXPECT_EQ(engine->inflight(), 0u);
  EXPECT_EQ(engine->Run(/*wait=*/false, out), 0);  // nothing happened
}

INSTANTIATE_TEST_SUITE_P(UringAndSync, EngineFilesTest,
                         ::testing::Values(EngineKind::kUring,
                                           EngineKind::kSync),
                         [](const ::testing::TestParamInfo<EngineKind>& info) {
                           return std::string(EngineKindName(info.param));
                         });

}  // namespace
}  // namespace pvdisk::io::testing
