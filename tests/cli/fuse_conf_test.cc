// FuseConfAllowsOther: whether fuse.conf lets a user mount with allow_other,
// read from real files as fusermount3 reads /etc/fuse.conf.
#include "cli/fuse_conf.h"

#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

class FuseConfTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = dir_.File("fuse.conf");
    std::ofstream(path) << text;
    return path;
  }
  pvdisk::testing::TempDir dir_{"pvdisk_cli_test"};
};

TEST_F(FuseConfTest, TheLineOnItsOwnAllows) {
  EXPECT_TRUE(FuseConfAllowsOther(Write("# comment\nuser_allow_other\n")));
  EXPECT_TRUE(
      FuseConfAllowsOther(Write("  user_allow_other  \nmount_max = 9")));
}

TEST_F(FuseConfTest, DebiansDefaultFileDoesNotAllow) {
  EXPECT_FALSE(FuseConfAllowsOther(
      Write("# user_allow_other - Using the allow_other mount option works\n"
            "#user_allow_other\n\n#mount_max = 1000\n")));
}

TEST_F(FuseConfTest, MissingFileDoesNotAllow) {
  EXPECT_FALSE(FuseConfAllowsOther(dir_.File("absent.conf")));
}

TEST_F(FuseConfTest, OtherTextOnTheLineDoesNotAllow) {
  EXPECT_FALSE(FuseConfAllowsOther(Write("user_allow_other=1\n")));
  EXPECT_FALSE(FuseConfAllowsOther(Write("nouser_allow_other\n")));
}

TEST_F(FuseConfTest, AllowOtherNeedsTheLineUnlessRoot) {
  const std::string denies = Write("# user_allow_other\n");
  absl::Status refused = CheckAllowOther(true, /*root=*/false, denies);
  EXPECT_TRUE(absl::IsInvalidArgument(refused));
  EXPECT_EQ(refused.message(),
            "--allow-other needs 'user_allow_other' in " + denies +
                " when not run as root (ask an administrator to add that "
                "line), or mount without --allow-other so that only you "
                "reach the mount");
  EXPECT_TRUE(CheckAllowOther(true, /*root=*/true, denies).ok());
  EXPECT_TRUE(CheckAllowOther(false, /*root=*/false, denies).ok());
  EXPECT_TRUE(
      CheckAllowOther(true, /*root=*/false, Write("user_allow_other\n")).ok());
}

}  // namespace
}  // namespace pvdisk::cli
