// pvdisk info: format, sizes and the backing chain of raw and qcow2 images
// (made by pvdisk create), as text and JSON; bad input is a usage error.
#include <string>

#include "cli/commands.h"
#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

std::string Info(const std::vector<std::string>& args, int* code) {
  ::testing::internal::CaptureStdout();
  *code = RunInfo(args);
  return ::testing::internal::GetCapturedStdout();
}

TEST(RunInfoTest, DescribesAChainAsTextAndJson) {
  pvdisk::testing::TempDir dir("pvdisk_info");
  ASSERT_EQ(RunCreate({dir.File("base.raw"), "--size", "2M"}), kExitOk);
  ASSERT_EQ(RunCreate({dir.File("top.qcow2"), "--format", "qcow2",
                       "--cluster-size", "4K", "--backing", "base.raw"}),
            kExitOk);
  int code = -1;
  std::string text = Info({dir.File("top.qcow2")}, &code);
  EXPECT_EQ(code, kExitOk);
  EXPECT_NE(text.find("format: qcow2"), std::string::npos) << text;
  EXPECT_NE(text.find("cluster size: 4096"), std::string::npos) << text;
  EXPECT_NE(text.find("virtual size: 2 MiB (2097152 bytes)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("backing file: base.raw (format raw)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("backing file (depth 1):"), std::string::npos) << text;
  std::string json = Info({dir.File("top.qcow2"), "--json"}, &code);
  EXPECT_EQ(code, kExitOk);
  EXPECT_NE(json.find("\"allocated\": 0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"format\": \"raw\""), std::string::npos) << json;
}

TEST(RunInfoTest, BadInputIsAUsageError) {
  pvdisk::testing::TempDir dir("pvdisk_info");
  int code = -1;
  Info({dir.File("missing.qcow2")}, &code);
  EXPECT_EQ(code, kExitUsage);
  Info({}, &code);
  EXPECT_EQ(code, kExitUsage);
  Info({dir.File("a"), "--bogus"}, &code);
  EXPECT_EQ(code, kExitUsage);
  EXPECT_EQ(RunInfo({"--help"}), kExitOk);
}

}  // namespace
}  // namespace pvdisk::cli
