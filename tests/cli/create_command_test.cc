#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

namespace fs = std::filesystem;

class TempDir : public pvdisk::testing::TempDir {
 public:
  TempDir() : pvdisk::testing::TempDir("pvdisk_create") {}
};

TEST(RunCreateTest, CreatesSparseImageOfTheGivenSize) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  EXPECT_EQ(RunCreate({path, "--size", "4M"}), kExitOk);
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(fs::file_size(path), 4u << 20);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 4u << 20);  // sparse
}

TEST(RunCreateTest, RefusesExistingFileUnlessForced) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  ASSERT_EQ(RunCreate({path, "--size=64K"}), kExitOk);
  EXPECT_NE(RunCreate({path, "--size=128K"}), kExitOk);
  EXPECT_EQ(fs::file_size(path), 64u << 10);
  EXPECT_EQ(RunCreate({path, "--size=128K", "--force"}), kExitOk);
  EXPECT_EQ(fs::file_size(path), 128u << 10);
}

TEST(RunCreateTest, BadInputIsAUsageError) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  EXPECT_EQ(RunCreate({path}), kExitUsage);                        // no size
  EXPECT_EQ(RunCreate({path, "--size", "12Q"}), kExitUsage);       // bad size
  EXPECT_EQ(RunCreate({"--size", "1M"}), kExitUsage);              // no path
  EXPECT_EQ(RunCreate({path, path, "--size", "1M"}), kExitUsage);  // two
  EXPECT_EQ(RunCreate({path, "--size", "1M", "--sparse"}), kExitUsage);
  EXPECT_EQ(RunCreate({path, "--size"}), kExitUsage);
  EXPECT_FALSE(fs::exists(path));
}

// qcow2: the image is judged by qemu-img check; raw stays the default.
TEST(RunCreateTest, CreatesQcow2ImagesQemuImgAccepts) {
  TempDir dir;
  const std::string base = dir.File("base.qcow2");
  const std::string top = dir.File("top.qcow2");
  ASSERT_EQ(RunCreate({base, "--size", "8M", "--format", "qcow2",
                       "--cluster-size", "4K"}),
            kExitOk);
  ASSERT_EQ(RunCreate({top, "--format=qcow2", "--backing", "base.qcow2"}),
            kExitOk);
  for (const std::string& image : {base, top}) {
    const std::string check = "qemu-img check -q '" + image + "'";
    EXPECT_EQ(std::system(check.c_str()), 0) << check;
    const std::string io =
        "qemu-io -c 'read -P 0 0 64k' '" + image + "' >/dev/null";
    EXPECT_EQ(std::system(io.c_str()), 0) << io;
  }
}

// --extended-l2: the feature QEMU reads as extended_l2=on, over a backing
// file, and a write qemu-io makes there passes qemu-img check.
TEST(RunCreateTest, CreatesExtendedL2ImagesQemuImgAccepts) {
  TempDir dir;
  const std::string base = dir.File("base.qcow2");
  const std::string top = dir.File("top.qcow2");
  ASSERT_EQ(RunCreate({base, "--size", "8M", "--format", "qcow2",
                       "--extended-l2", "--cluster-size", "16K"}),
            kExitOk);
  ASSERT_EQ(RunCreate({top, "--format=qcow2", "--backing", "base.qcow2",
                       "--extended-l2", "--cluster-size=2M"}),
            kExitOk);
  for (const std::string& image : {base, top}) {
    const std::string info =
        "qemu-img info '" + image + "' | grep -q 'extended l2: true'";
    EXPECT_EQ(std::system(info.c_str()), 0) << info;
    const std::string io = "qemu-io -c 'write -P 7 5k 3k' '" + image +
                           "' >/dev/null && qemu-img check -q '" + image + "'";
    EXPECT_EQ(std::system(io.c_str()), 0) << io;
  }
}

TEST(RunCreateTest, BadQcow2InputIsAUsageErrorAndCreatesNothing) {
  TempDir dir;
  const std::string path = dir.File("disk.qcow2");
  EXPECT_EQ(RunCreate({path, "--size=1M", "--format=vmdk"}), kExitUsage);
  EXPECT_EQ(
      RunCreate({path, "--size=1M", "--format=qcow2", "--cluster-size=3000"}),
      kExitUsage);
  EXPECT_EQ(
      RunCreate({path, "--size=1M", "--format=qcow2", "--cluster-size=4M"}),
      kExitUsage);
  EXPECT_EQ(RunCreate({path, "--format=qcow2", "--backing=missing.qcow2"}),
            kExitUsage);
  EXPECT_EQ(RunCreate({path, "--size=1M", "--cluster-size=4K"}),
            kExitUsage);  // raw has no clusters
  EXPECT_EQ(RunCreate({path, "--format=qcow2"}), kExitUsage);  // no size
  // Subclusters need clusters of 16 KiB at least, and qcow2.
  EXPECT_EQ(RunCreate({path, "--size=1M", "--format=qcow2", "--extended-l2",
                       "--cluster-size=8K"}),
            kExitUsage);
  EXPECT_EQ(RunCreate({path, "--size=1M", "--extended-l2"}), kExitUsage);
  EXPECT_FALSE(fs::exists(path));
}

TEST(RunCreateTest, Help) { EXPECT_EQ(RunCreate({"--help"}), kExitOk); }

}  // namespace
}  // namespace pvdisk::cli
