// Engine kinds by name, option checks, and the fault wrapper being applied.
#include "io/engine_factory.h"

#include <string>

#include "absl/status/status.h"
#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

TEST(EngineFactoryTest, ParsesKinds) {
  for (EngineKind kind :
       {EngineKind::kUring, EngineKind::kSync, EngineKind::kNull}) {
    auto parsed = ParseEngineKind(EngineKindName(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(EngineKindName(EngineKind::kUring), "uring");
  EXPECT_EQ(EngineKindName(EngineKind::kSync), "sync");
  EXPECT_EQ(EngineKindName(EngineKind::kNull), "null");
}

TEST(EngineFactoryTest, RejectsUnknownKind) {
  auto parsed = ParseEngineKind("aio");
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status()));
  EXPECT_EQ(parsed.status().message(),
            "unknown engine 'aio'; allowed: uring, sync, null");
}

class EngineFactoryImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.File("disk.img");
    ASSERT_TRUE(CreateImage(path, 64 * 512, false).ok());
    auto image = ImageFile::Open(path, false, true);
    ASSERT_TRUE(image.ok()) << image.status();
    image_ = *std::move(image);
  }
  TempDir dir_;
  std::unique_ptr<ImageFile> image_;
};

TEST_F(EngineFactoryImageTest, RejectsBadOptions) {
  EngineOptions options;
  options.kind = EngineKind::kSync;
  options.depth = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateEngine(options, *image_).status()));
  options.depth = 8;
  options.fault = FaultRange{60, 8};  // runs past the 64-sector image
  EXPECT_TRUE(absl::IsInvalidArgument(CreateEngine(options, *image_).status()));
  options.fault = FaultRange{0, 0};
  EXPECT_TRUE(absl::IsInvalidArgument(CreateEngine(options, *image_).status()));
  options.fault = FaultRange{56, 8};
  EXPECT_TRUE(CreateEngine(options, *image_).ok());
}

TEST_F(EngineFactoryImageTest, WrapsWithFaultsWhenAsked) {
  EngineOptions options;
  options.kind = EngineKind::kNull;
  options.depth = 8;
  options.fault = FaultRange{0, 1};
  auto engine = CreateEngine(options, *image_);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->name(), "null");
  EXPECT_EQ(Do(**engine, Range(IoOp::kDiscard, 0, 512)), -EIO);
  EXPECT_EQ(Do(**engine, Range(IoOp::kDiscard, 512, 512)), 512);
}

}  // namespace
}  // namespace pvdisk::io::testing
