// A file system made through a direct-io loop device over the mount's disk
// file is sound: ext4 made on `losetup --direct-io=on` over the file passes
// e2fsck, holds a file written through it, and passes e2fsck again after
// the file was written and the file system unmounted; the file reads back
// after the loop device was set up anew. (The loop driver's direct I/O
// sends the file system's blocks as O_DIRECT reads and writes of the disk
// file, sector-aligned but of any length and offset mkfs and the journal
// choose; a server that mishandles them leaves a file system that does not
// mount.) Needs root, losetup, mkfs.ext4 and e2fsck.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string Trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \n") - begin + 1);
}

// A loop device over a file, detached on destruction.
class LoopDevice {
 public:
  LoopDevice(const std::string& file, bool direct_io) {
    result_ =
        RunCommand({"losetup", "--find", "--show",
                    direct_io ? "--direct-io=on" : "--direct-io=off", file});
    if (result_.exit_code == 0) device_ = Trimmed(result_.out);
  }
  ~LoopDevice() {
    if (!device_.empty()) RunCommand({"losetup", "-d", device_});
  }
  LoopDevice(const LoopDevice&) = delete;
  LoopDevice& operator=(const LoopDevice&) = delete;

  bool ok() const { return !device_.empty(); }
  const std::string& device() const { return device_; }
  const CommandResult& result() const { return result_; }

 private:
  CommandResult result_;
  std::string device_;
};

// A file system mounted at a directory, unmounted on destruction.
class FsMount {
 public:
  FsMount(const std::string& device, const std::string& dir) : dir_(dir) {
    result_ = RunCommand({"mount", device, dir});
    mounted_ = result_.exit_code == 0;
  }
  ~FsMount() { Unmount(); }
  FsMount(const FsMount&) = delete;
  FsMount& operator=(const FsMount&) = delete;

  bool ok() const { return mounted_; }
  const CommandResult& result() const { return result_; }
  int Unmount() {
    if (!mounted_) return 0;
    mounted_ = false;
    return RunCommand({"umount", dir_}).exit_code;
  }

 private:
  std::string dir_;
  CommandResult result_;
  bool mounted_ = false;
};

std::string MissingTools() {
  if (geteuid() != 0) return "needs root (losetup, mount)";
  for (const char* tool : {"losetup", "mkfs.ext4", "e2fsck"}) {
    if (RunCommand({"sh", "-c", std::string("command -v ") + tool}).exit_code !=
        0) {
      return std::string(tool) + " not found";
    }
  }
  return "";
}

TEST(LoopFilesystemTest, Ext4ThroughADirectIoLoopStaysClean) {
  PVDISK_REQUIRE_FUSE();
  if (std::string why = MissingTools(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string image = dir.path() + "/disk0.img";
  CreateImage(image, 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string fs_dir = dir.MakeDir("fs");
  const std::string data = PatternBytes(41, 3 * kMiB + 512);
  {
    LoopDevice loop(mount.Path("disk0.img"), /*direct_io=*/true);
    ASSERT_TRUE(loop.ok()) << loop.result().Describe();
    CommandResult dio = RunCommand(
        {"losetup", "--list", "--noheadings", "-O", "DIO", loop.device()});
    ASSERT_EQ(Trimmed(dio.out), "1") << dio.Describe();

    CommandResult mkfs = RunCommand({"mkfs.ext4", "-q", "-F", loop.device()});
    ASSERT_EQ(mkfs.exit_code, 0) << mkfs.Describe();
    CommandResult fsck = RunCommand({"e2fsck", "-f", "-n", loop.device()});
    ASSERT_EQ(fsck.exit_code, 0) << "after mkfs: " << fsck.Describe();

    FsMount fs(loop.device(), fs_dir);
    ASSERT_TRUE(fs.ok()) << fs.result().Describe();
    WriteWholeFile(fs_dir + "/data", data);
    {
      Fd fd = Open(fs_dir + "/data", O_RDONLY);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    }
    ASSERT_EQ(fs.Unmount(), 0);
    fsck = RunCommand({"e2fsck", "-f", "-n", loop.device()});
    EXPECT_EQ(fsck.exit_code, 0) << "after the write: " << fsck.Describe();
  }
  // Set up anew (nothing cached in the loop device): the file is there.
  LoopDevice loop(mount.Path("disk0.img"), /*direct_io=*/true);
  ASSERT_TRUE(loop.ok()) << loop.result().Describe();
  FsMount fs(loop.device(), fs_dir);
  ASSERT_TRUE(fs.ok()) << fs.result().Describe();
  EXPECT_TRUE(ReadWholeFile(fs_dir + "/data") == data);
}

}  // namespace
}  // namespace pvdisk::fuse_testing
