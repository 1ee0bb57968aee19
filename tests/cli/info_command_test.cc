// pvdisk info: format, sizes and the backing chain of raw and qcow2 images
// (made by pvdisk create), as text and JSON; bad input is a usage error.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

// Extended L2 entries: the feature named, and the allocated bytes those of
// the subclusters a write filled (3 KiB: six of 512 bytes).
TEST(RunInfoTest, NamesExtendedL2AndCountsAllocatedSubclusters) {
  pvdisk::testing::TempDir dir("pvdisk_info");
  const std::string image = dir.File("xl2.qcow2");
  ASSERT_EQ(RunCreate({image, "--size", "1M", "--format", "qcow2",
                       "--cluster-size", "16K", "--extended-l2"}),
            kExitOk);
  const std::string write =
      "qemu-io -c 'write -P 1 5k 3k' '" + image + "' >/dev/null";
  ASSERT_EQ(std::system(write.c_str()), 0) << write;
  int code = -1;
  std::string text = Info({image}, &code);
  EXPECT_EQ(code, kExitOk);
  EXPECT_NE(text.find("features: extended L2"), std::string::npos) << text;
  std::string json = Info({image, "--json"}, &code);
  EXPECT_NE(json.find("\"allocated\": 3072"), std::string::npos) << json;
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

// Writes `bytes` at `offset` of `path`.
void Patch(const std::string& path, uint64_t offset, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes.size()));
  close(fd);
}

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
          static_cast<char>(v >> 8), static_cast<char>(v)};
}

// Hostile headers: `pvdisk info` refuses each with one line on stderr that
// names what is wrong, and exits with the usage status; never a crash.
TEST(RunInfoTest, HostileImagesAreRefusedInOneLine) {
  pvdisk::testing::TempDir dir("pvdisk_info");
  struct Case {
    uint64_t offset;
    std::string bytes;
    const char* names;
  };
  const Case cases[] = {
      {96, Be32(7), "refcount_order 7"},
      {20, Be32(8), "cluster_bits 8"},
      {20, Be32(31), "cluster_bits 31"},
      {36, Be32(1u << 31), "l1_size 2147483648"},
  };
  for (const Case& c : cases) {
    const std::string img = dir.File("hostile.qcow2");
    ASSERT_EQ(RunCreate({img, "--size", "1M", "--format", "qcow2", "--force"}),
              kExitOk);
    Patch(img, c.offset, c.bytes);
    ::testing::internal::CaptureStderr();
    int code = -1;
    Info({img}, &code);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, kExitUsage) << c.names;
    EXPECT_NE(err.find(c.names), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  // A backing loop: y.qcow2's header names x.qcow2, which names y.qcow2.
  const std::string x = dir.File("x.qcow2");
  const std::string y = dir.File("y.qcow2");
  ASSERT_EQ(RunCreate({y, "--size", "1M", "--format", "qcow2"}), kExitOk);
  ASSERT_EQ(RunCreate({x, "--format", "qcow2", "--backing", "y.qcow2"}),
            kExitOk);
  ASSERT_EQ(
      RunCreate({y, "--format", "qcow2", "--backing", "x.qcow2", "--force"}),
      kExitUsage)
      << "create follows the chain and refuses the loop";
  std::ifstream in(x, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const size_t at = bytes.find("y.qcow2");
  ASSERT_NE(at, std::string::npos);
  Patch(x, at, "x.qcow2");
  ::testing::internal::CaptureStderr();
  int code = -1;
  Info({x}, &code);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, kExitUsage);
  EXPECT_NE(err.find("loops"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

}  // namespace
}  // namespace pvdisk::cli
