// Who may reach what through the mount, tried as a real unprivileged user
// (uid and gid 65534, "nobody" on Debian, entered with setpriv): a disk file
// carries its image's owner, group and mode, other users reach the mount
// only with --allow-other, and the kernel checks the modes
// (default_permissions).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uid_t kUnprivileged = 65534;

// Runs `argv` as uid/gid 65534 with no supplementary groups.
CommandResult RunUnprivileged(const std::vector<std::string>& argv) {
  std::vector<std::string> full = {
      "setpriv", "--reuid=" + std::to_string(kUnprivileged),
      "--regid=" + std::to_string(kUnprivileged), "--clear-groups"};
  full.insert(full.end(), argv.begin(), argv.end());
  return RunCommand(full, std::chrono::seconds(30));
}

// The first 16 bytes of `path` as the unprivileged user reads them.
CommandResult ReadAsUnprivileged(const std::string& path) {
  return RunUnprivileged({"head", "-c", "16", path});
}

CommandResult WriteAsUnprivileged(const std::string& path) {
  return RunUnprivileged({"dd", "if=/dev/zero", "of=" + path, "bs=512",
                          "count=1", "conv=notrunc", "status=none"});
}

// The mount's super options from /proc/self/mountinfo (after the " - ").
std::string SuperOptions(const std::string& mountpoint) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string id, parent, dev, root, point;
    words >> id >> parent >> dev >> root >> point;
    if (point != mountpoint) continue;
    size_t dash = line.find(" - ");
    std::istringstream rest(line.substr(dash + 3));
    std::string type, source, options;
    rest >> type >> source >> options;
    return options;
  }
  return "";
}

bool HasOption(const std::string& options, const std::string& option) {
  return ("," + options + ",").find("," + option + ",") != std::string::npos;
}

class PermissionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PVDISK_REQUIRE_FUSE();
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root to act as another user (setpriv)";
    }
    // The unprivileged user must be able to walk to the mountpoint.
    ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0) << std::strerror(errno);
  }

  // An image of 1 MiB starting with `head`, with `mode`.
  std::string Image(const std::string& name, mode_t mode,
                    const std::string& head) {
    std::string path = dir_.Path(name);
    CreateImage(path, kMiB);
    Fd fd = Open(path, O_WRONLY);
    EXPECT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 0, head);
    EXPECT_EQ(chmod(path.c_str(), mode), 0) << std::strerror(errno);
    return path;
  }

  TempDir dir_;
};

TEST_F(PermissionsTest, DiskFilesShowTheirImagesOwnerGroupAndMode) {
  std::string secret = Image("secret.img", 0600, "secret bytes....");
  std::string shared = Image("shared.img", 0640, "shared bytes....");
  ASSERT_EQ(chown(shared.c_str(), kUnprivileged, kUnprivileged), 0);
  std::string readonly = Image("readonly.img", 0664, "readonly bytes..");
  Mount mount(dir_.MakeDir("mnt"),
              {"--disk", secret, "--disk", shared, "--disk", readonly + ",ro"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  struct stat st;
  ASSERT_EQ(stat(mount.Path("secret.img").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, S_IFREG | 0600);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 0u);
  ASSERT_EQ(stat(mount.Path("shared.img").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, S_IFREG | 0640);
  EXPECT_EQ(st.st_uid, kUnprivileged);
  EXPECT_EQ(st.st_gid, kUnprivileged);
  // A read-only disk shows no write bits, whatever its image has.
  ASSERT_EQ(stat(mount.Path("readonly.img").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, S_IFREG | 0444);
  // The stats files are as private as the most private disk (secret.img:
  // nobody but its owner reads it), and belong to the mount's owner.
  ASSERT_EQ(stat(mount.Path("stats").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, S_IFREG | 0600);
  EXPECT_EQ(st.st_uid, geteuid());
  ASSERT_EQ(stat(mount.Path("stats.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, S_IFREG | 0400);
}

TEST_F(PermissionsTest, WithoutAllowOtherNoOtherUserReachesTheMount) {
  std::string open_image = Image("open.img", 0644, "open bytes......");
  Mount mount(dir_.MakeDir("mnt"), {"--disk", open_image});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  std::string options = SuperOptions(mount.mountpoint());
  EXPECT_FALSE(HasOption(options, "allow_other")) << options;
  EXPECT_TRUE(HasOption(options, "default_permissions")) << options;

  // Even a world-readable image is out of reach: the mount is the owner's.
  CommandResult read = ReadAsUnprivileged(mount.Path("open.img"));
  EXPECT_NE(read.exit_code, 0) << read.Describe();
  EXPECT_NE(read.err.find("Permission denied"), std::string::npos)
      << read.Describe();
  EXPECT_EQ(read.out, "");
  CommandResult stats = ReadAsUnprivileged(mount.Path("stats"));
  EXPECT_NE(stats.exit_code, 0) << stats.Describe();
  // The owner (root here) still reads it.
  Fd fd = Open(mount.Path("open.img"), O_RDONLY);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  EXPECT_EQ(PreadAll(fd.get(), 0, 16), "open bytes......");
}

TEST_F(PermissionsTest, WithAllowOtherTheImagesModesDecide) {
  std::string secret = Image("secret.img", 0600, "secret bytes....");
  std::string open_image = Image("open.img", 0644, "open bytes......");
  Mount mount(dir_.MakeDir("mnt"),
              {"--disk", secret, "--disk", open_image, "--allow-other"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  std::string options = SuperOptions(mount.mountpoint());
  EXPECT_TRUE(HasOption(options, "allow_other")) << options;
  EXPECT_TRUE(HasOption(options, "default_permissions")) << options;

  // The private image: neither read nor written.
  CommandResult read = ReadAsUnprivileged(mount.Path("secret.img"));
  EXPECT_NE(read.exit_code, 0) << read.Describe();
  EXPECT_NE(read.err.find("Permission denied"), std::string::npos)
      << read.Describe();
  EXPECT_EQ(read.out.find("secret"), std::string::npos) << read.Describe();
  CommandResult write = WriteAsUnprivileged(mount.Path("secret.img"));
  EXPECT_NE(write.exit_code, 0) << write.Describe();
  // The world-readable image: read, but not written (root owns it).
  read = ReadAsUnprivileged(mount.Path("open.img"));
  EXPECT_EQ(read.exit_code, 0) << read.Describe();
  EXPECT_EQ(read.out, "open bytes......");
  write = WriteAsUnprivileged(mount.Path("open.img"));
  EXPECT_NE(write.exit_code, 0) << write.Describe();
  // The stats show secret.img's path and traffic: as private as it is.
  CommandResult stats = ReadAsUnprivileged(mount.Path("stats.json"));
  EXPECT_NE(stats.exit_code, 0) << stats.Describe();

  // Nothing the unprivileged user tried reached the images.
  Fd fd = Open(secret, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(PreadAll(fd.get(), 0, 16), "secret bytes....");
  fd = Open(open_image, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(PreadAll(fd.get(), 0, 16), "open bytes......");
}

TEST_F(PermissionsTest, StatsAreReadableByOthersWhenEveryDiskIs) {
  std::string open_image = Image("open.img", 0644, "open bytes......");
  Mount mount(dir_.MakeDir("mnt"), {"--disk", open_image, "--allow-other"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult stats = ReadAsUnprivileged(mount.Path("stats.json"));
  EXPECT_EQ(stats.exit_code, 0) << stats.Describe();
  // But only the mount's owner resets the counters.
  CommandResult reset =
      RunUnprivileged({"sh", "-c", "echo reset > " + mount.Path("stats")});
  EXPECT_NE(reset.exit_code, 0) << reset.Describe();
  EXPECT_NE(reset.err.find("Permission denied"), std::string::npos)
      << reset.Describe();
}

TEST_F(PermissionsTest, AllowOtherForAUserNeedsUserAllowOther) {
  std::ifstream conf("/etc/fuse.conf");
  std::string line;
  while (std::getline(conf, line)) {
    if (line == "user_allow_other") {
      GTEST_SKIP() << "/etc/fuse.conf has user_allow_other on this machine";
    }
  }
  std::string image = Image("open.img", 0644, "open bytes......");
  std::string mountpoint = dir_.MakeDir("mnt");
  ASSERT_EQ(chown(mountpoint.c_str(), kUnprivileged, kUnprivileged), 0);
  CommandResult result =
      RunUnprivileged({PvdiskBinary(), "mount", mountpoint, "--disk",
                       image + ",ro", "--allow-other"});
  ExpectUsageError(result);
  EXPECT_NE(result.err.find("--allow-other needs 'user_allow_other' in "
                            "/etc/fuse.conf"),
            std::string::npos)
      << result.Describe();
  EXPECT_FALSE(IsMounted(mountpoint));
}

}  // namespace
}  // namespace pvdisk::fuse_testing
