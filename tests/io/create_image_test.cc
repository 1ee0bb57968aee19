// CreateImage: sparse files of the asked size, refusal to clobber, and no
// leftovers on failure.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "io/image_file.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(CreateImageTest, MakesASparseFile) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  ASSERT_TRUE(CreateImage(path, uint64_t{64} << 20, false).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 64 << 20);
  EXPECT_LT(st.st_blocks * 512, 1 << 20) << "not sparse";
  EXPECT_EQ(ReadFileRange(path, (32 << 20) - 512, 1024),
            std::string(1024, '\0'));
}

TEST(CreateImageTest, RefusesAnExistingFileWithoutForce) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  WriteFile(path, 4096, 'q');
  absl::Status status = CreateImage(path, 8192, false);
  EXPECT_TRUE(absl::IsAlreadyExists(status)) << status;
  EXPECT_EQ(status.message(),
            path + " already exists; pass --force to overwrite it");
  EXPECT_EQ(ReadFileRange(path, 0, 4096), std::string(4096, 'q'));
}

TEST(CreateImageTest, ForceMakesAFreshSparseImage) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  WriteFile(path, 1 << 20, 'q');
  ASSERT_TRUE(CreateImage(path, 2 << 20, true).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 2 << 20);
  EXPECT_LT(st.st_blocks * 512, 256 << 10) << "old data kept";
  EXPECT_EQ(ReadFileRange(path, 0, 4096), std::string(4096, '\0'));
}

TEST(CreateImageTest, BadSizeLeavesNothingBehind) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  for (uint64_t size : {uint64_t{0}, uint64_t{1000}, uint64_t{513}}) {
    absl::Status status = CreateImage(path, size, false);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_NE(status.message().find("multiple of 512"), std::string::npos)
        << status;
    EXPECT_FALSE(Exists(path));
  }
}

TEST(CreateImageTest, FailureAfterCreationRemovesTheFile) {
  TempDir dir;
  const std::string path = dir.File("huge.img");
  // Far beyond what any Linux filesystem allows for one file: ftruncate
  // fails after the file has been created.
  absl::Status status = CreateImage(path, uint64_t{1} << 62, false);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_FALSE(Exists(path));
}

TEST(CreateImageTest, MissingParentDirectory) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/disk.img");
  absl::Status status = CreateImage(path, 4096, false);
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_NE(status.message().find("directory " + dir.File("no/such/dir") +
                                  " does not exist"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace pvdisk::io::testing
