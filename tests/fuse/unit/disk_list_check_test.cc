// CheckDiskList (fuse/disk_list_check.h): a mount's --disk list against the
// files it names and the mountpoint, on real files in a temp dir; one test
// per rule, with the message the user sees.
#include "fuse/disk_list_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse {
namespace {

class DiskListCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(mkdir(mountpoint().c_str(), 0755), 0);
    ASSERT_EQ(mkdir(dir_.File("sub").c_str(), 0755), 0);
    MakeImage("disk0.img", 1 << 20);
  }
  std::string mountpoint() const { return dir_.File("mnt"); }
  std::string MakeImage(const std::string& name, off_t size) {
    const std::string path = dir_.File(name);
    int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, size), 0);
    close(fd);
    return path;
  }
  static DiskSpec File(const std::string& path) {
    DiskSpec spec;
    spec.path = path;
    spec.arg = path;
    return spec;
  }
  static DiskSpec Rbd(const std::string& image, const std::string& conf = "") {
    DiskSpec spec;
    spec.path = "rbd:pool/" + image;
    spec.arg = spec.path;
    spec.rbd = io::RbdSpec{};
    spec.rbd->pool = "pool";
    spec.rbd->image = image;
    spec.rbd->conf = conf;
    return spec;
  }
  std::string ErrorOf(std::vector<DiskSpec> specs) {
    absl::StatusOr<CheckedDisks> checked =
        CheckDiskList(std::move(specs), mountpoint());
    EXPECT_FALSE(checked.ok());
    return std::string(checked.status().message());
  }
  pvdisk::testing::TempDir dir_{"pvdisk_disk_list_test"};
};

TEST_F(DiskListCheckTest, ImagesBecomeAbsoluteAndNamedAfterTheirFiles) {
  MakeImage("sub/disk1.img", 2 << 20);
  // A path through another directory names the same file.
  absl::StatusOr<CheckedDisks> checked = CheckDiskList(
      {File(dir_.File("disk0.img")), File(dir_.File("mnt/../sub/disk1.img"))},
      mountpoint());
  ASSERT_TRUE(checked.ok()) << checked.status();
  ASSERT_EQ(checked->disks.size(), 2u);
  EXPECT_EQ(checked->disks[0].path, dir_.File("disk0.img"));
  EXPECT_EQ(checked->disks[1].path, dir_.File("sub/disk1.img"));
  EXPECT_EQ(checked->names,
            (std::vector<std::string>{"disk0.img", "disk1.img"}));
}

TEST_F(DiskListCheckTest, AMissingImageIsNamed) {
  const std::string missing = dir_.File("missing.img");
  EXPECT_EQ(ErrorOf({File(missing)}), "image " + missing + " does not exist");
}

TEST_F(DiskListCheckTest, AnImageInsideTheMountpointIsRefused) {
  const std::string inside = MakeImage("mnt/inside.img", 1 << 20);
  EXPECT_EQ(ErrorOf({File(inside)}),
            "image " + inside +
                " lies inside the mountpoint; the daemon never touches its "
                "own mountpoint, so keep images outside it");
}

TEST_F(DiskListCheckTest, AnImageGivenTwiceIsRefusedByAnyPath) {
  const std::string other = dir_.File("sub/../disk0.img");
  EXPECT_EQ(
      ErrorOf({File(dir_.File("disk0.img")), File(other)}),
      "--disk " + other + " is given twice; each image may be served once");
}

TEST_F(DiskListCheckTest, AnImageNamedLikeTheStatsFileIsRefused) {
  const std::string stats = MakeImage("stats", 1 << 20);
  EXPECT_EQ(ErrorOf({File(stats)}),
            "image " + stats +
                " would be named 'stats' in the mount, which is the name of "
                "one of the mount's own files; rename the image");
}

TEST_F(DiskListCheckTest, TwoImagesOfOneNameAreRefused) {
  MakeImage("sub/disk0.img", 1 << 20);
  EXPECT_EQ(
      ErrorOf({File(dir_.File("disk0.img")), File(dir_.File("sub/disk0.img"))}),
      "two images would both be named 'disk0.img' in the mount; rename one "
      "of them");
}

TEST_F(DiskListCheckTest, AnImageThatDoesNotOpenAsADiskIsRefused) {
  // Not a whole number of sectors.
  const std::string odd = MakeImage("odd.img", 1000);
  const std::string message = ErrorOf({File(odd)});
  EXPECT_NE(message.find(odd), std::string::npos) << message;
}

TEST_F(DiskListCheckTest, TheSizeTheDiskExpectsMustBeTheImages) {
  DiskSpec spec = File(dir_.File("disk0.img"));
  spec.expected_size = 2 << 20;
  EXPECT_EQ(ErrorOf({spec}),
            "--disk " + spec.arg + ": the image has 1048576 bytes, not 2 MiB");
}

TEST_F(DiskListCheckTest, AnRbdDisksConfMustExistAndBecomesAbsolute) {
  const std::string missing = dir_.File("missing.conf");
  DiskSpec spec = Rbd("vol", missing);
  EXPECT_EQ(ErrorOf({spec}), "--disk " + spec.arg + ": Ceph configuration " +
                                 missing + " does not exist");
  const std::string conf = MakeImage("ceph.conf", 0);
  absl::StatusOr<CheckedDisks> checked =
      CheckDiskList({Rbd("vol", dir_.File("sub/../ceph.conf"))}, mountpoint());
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->disks[0].rbd->conf, conf);
  EXPECT_EQ(checked->names, (std::vector<std::string>{"vol"}));
}

TEST_F(DiskListCheckTest, AnRbdImageIsServedOnceAndNotNamedStats) {
  EXPECT_EQ(
      ErrorOf({Rbd("vol"), Rbd("vol")}),
      "--disk rbd:pool/vol is given twice; each image may be served once");
  EXPECT_EQ(
      ErrorOf({Rbd("stats.json")}),
      "image rbd:pool/stats.json would be named 'stats.json' in the mount, "
      "which is the name of one of the mount's own files; rename the image");
  EXPECT_EQ(ErrorOf({Rbd(".trace")}),
            "image rbd:pool/.trace would be named '.trace' in the mount, which "
            "is the name of one of the mount's own files; rename the image");
  MakeImage("vol", 1 << 20);
  EXPECT_EQ(ErrorOf({File(dir_.File("vol")), Rbd("vol")}),
            "two images would both be named 'vol' in the mount; serve one of "
            "them per mount");
}

}  // namespace
}  // namespace pvdisk::fuse
