#include "cli/mount_helper.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/temp_dir.h"

namespace pvdisk::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MountHelperTest, TranslatesSourceAndOptionsToMountFlags) {
  absl::StatusOr<std::vector<std::string>> args = MountHelperArgs(
      {"/i/a.img:/i/b.qcow2,format=qcow2:rbd:pool/vol,id=admin", "/mnt", "-o",
       "rw,queues=4,frontend=virtio,allow_other,nofail,x-systemd.automount,"
       "dev,suid,shutdown_timeout=10"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ElementsAre("/mnt", "--disk", "/i/a.img", "--disk",
                                 "/i/b.qcow2,format=qcow2", "--disk",
                                 "rbd:pool/vol,id=admin", "--queues=4",
                                 "--frontend=virtio", "--allow-other",
                                 "--shutdown-timeout=10"));
}

TEST(MountHelperTest, RoMakesEveryDiskReadOnly) {
  absl::StatusOr<std::vector<std::string>> args =
      MountHelperArgs({"/i/a.img:/i/b.img", "/mnt", "-o", "ro"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ElementsAre("/mnt", "--disk", "/i/a.img,ro", "--disk",
                                 "/i/b.img,ro"));
}

TEST(MountHelperTest, RefusesWhatNoFlagIs) {
  absl::StatusOr<std::vector<std::string>> args =
      MountHelperArgs({"/i/a.img", "/mnt", "-o", "queues=4,bogus=1"});
  ASSERT_FALSE(args.ok());
  EXPECT_THAT(std::string(args.status().message()),
              HasSubstr("unknown mount option 'bogus=1'; allowed: "));
  EXPECT_THAT(std::string(args.status().message()), HasSubstr("queues=N"));
  // A disk is the source's, help is no mount's.
  EXPECT_FALSE(MountHelperArgs({"/i/a.img", "/mnt", "-o", "disk=/i/b"}).ok());
  EXPECT_FALSE(MountHelperArgs({"/i/a.img", "/mnt", "-o", "help"}).ok());
  // A value for a switch, none for a flag that takes one.
  EXPECT_THAT(
      std::string(MountHelperArgs({"/i/a.img", "/mnt", "-o", "allow_other=1"})
                      .status()
                      .message()),
      HasSubstr("allow-other takes no value"));
  EXPECT_THAT(std::string(MountHelperArgs({"/i/a.img", "/mnt", "-o", "queues"})
                              .status()
                              .message()),
              HasSubstr("queues takes a value: queues=N"));
  EXPECT_FALSE(MountHelperArgs({"/i/a.img::/i/b.img", "/mnt"}).ok());
  EXPECT_FALSE(MountHelperArgs({"/i/a.img"}).ok());
}

TEST(MountHelperTest, RecognisesOnlySourceAndExistingFolder) {
  pvdisk::testing::TempDir dir;
  EXPECT_TRUE(IsMountHelperCall({"/i/a.img", dir.path(), "-o", "rw"}));
  EXPECT_FALSE(IsMountHelperCall({"mount", dir.path()}));
  EXPECT_FALSE(IsMountHelperCall({"/i/a.img", dir.path() + "/none"}));
  EXPECT_FALSE(IsMountHelperCall({"--help", dir.path()}));
  EXPECT_FALSE(IsMountHelperCall({"/i/a.img"}));
}

}  // namespace
}  // namespace pvdisk::cli
