// CheckMountpoint (cli/mountpoint_check.h): pvdisk mount's MOUNTPOINT
// against the file system and the mount table, on real paths; one test per
// rule, with the message the user sees.
#include "cli/mountpoint_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

std::string ErrorOf(const std::string& mountpoint) {
  absl::StatusOr<std::string> checked = CheckMountpoint(mountpoint);
  EXPECT_TRUE(absl::IsInvalidArgument(checked.status())) << checked.status();
  return std::string(checked.status().message());
}

TEST(MountpointCheckTest, AnEmptyDirectoryIsTakenAsItsAbsolutePath) {
  pvdisk::testing::TempDir dir("pvdisk_mountpoint_test");
  ASSERT_EQ(mkdir(dir.File("mnt").c_str(), 0755), 0);
  absl::StatusOr<std::string> checked = CheckMountpoint(dir.File("mnt/../mnt"));
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(*checked, dir.File("mnt"));
}

TEST(MountpointCheckTest, AMissingMountpointIsNamed) {
  pvdisk::testing::TempDir dir("pvdisk_mountpoint_test");
  const std::string missing = dir.File("nope");
  EXPECT_EQ(ErrorOf(missing), "mountpoint " + missing + " does not exist");
}

TEST(MountpointCheckTest, ARegularFileIsNotAMountpoint) {
  pvdisk::testing::TempDir dir("pvdisk_mountpoint_test");
  const std::string file = dir.File("file");
  std::ofstream(file) << "x";
  EXPECT_EQ(ErrorOf(file), "mountpoint " + file + " is not a directory");
}

TEST(MountpointCheckTest, ADirectorySomethingIsMountedOnIsRefused) {
  // /proc is mounted wherever this runs.
  const std::string message = ErrorOf("/proc");
  EXPECT_EQ(message.rfind("mountpoint /proc is already mounted (proc from ", 0),
            0u)
      << message;
  EXPECT_NE(message.find("); unmount it first"), std::string::npos) << message;
}

}  // namespace
}  // namespace pvdisk::cli
