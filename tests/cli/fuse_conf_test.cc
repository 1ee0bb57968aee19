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

}  // namespace
}  // namespace pvdisk::cli
