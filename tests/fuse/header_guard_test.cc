// A raw disk whose format was probed refuses, with EPERM, a write that would
// put a known image header into its first sector, and counts it in
// `refused_header_writes`; the image keeps its bytes. With format=raw the
// same write goes through, and so does ordinary data at offset 0. Real
// mounts, with backend threads and with a backend process (the check is
// the frontend queue's, before the ring).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr size_t kBlock = 4096;

// A 4 KiB block that starts with `header` at `at`, the rest a pattern.
std::string BlockWith(const std::string& header, size_t at = 0) {
  std::string block = PatternBytes(7, kBlock);
  block.replace(at, header.size(), header);
  return block;
}

// pwrite's errno, or 0 if it wrote everything.
int WriteError(int fd, uint64_t offset, const std::string& data) {
  ssize_t n = pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
  if (n < 0) return errno;
  return static_cast<size_t>(n) == data.size() ? 0 : -1;
}

std::string ImageHead(const std::string& image) {
  Fd fd = Open(image, O_RDONLY);
  EXPECT_TRUE(fd.valid()) << image << ": " << std::strerror(errno);
  return PreadAll(fd.get(), 0, kBlock);
}

class HeaderGuardTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::vector<std::string> MountArgs(const std::string& disk) const {
    return {"--disk", disk, "--backend", GetParam()};
  }
};

TEST_P(HeaderGuardTest, ProbedRawDiskRefusesImageHeadersInSectorZero) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 4 * kMiB);
  const std::string before = ImageHead(image);
  {
    Mount mount(dir.MakeDir("mnt"), MountArgs(image));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    // A qcow2 header, whole block and sector-sized.
    EXPECT_EQ(WriteError(fd.get(), 0, BlockWith("QFI\xfb")), EPERM);
    EXPECT_EQ(WriteError(fd.get(), 0, BlockWith("QFI\xfb").substr(0, 512)),
              EPERM);
    // Unaligned: the read-modify-write would put the magic there.
    EXPECT_EQ(WriteError(fd.get(), 0, std::string("QFI\xfb", 4)), EPERM);
    // Other formats: VDI's signature lies at byte 64, LUKS and VMDK at 0.
    EXPECT_EQ(WriteError(fd.get(), 0, BlockWith("\x7f\x10\xda\xbe", 64)),
              EPERM);
    EXPECT_EQ(WriteError(fd.get(), 0, BlockWith("LUKS\xba\xbe")), EPERM);
    EXPECT_EQ(WriteError(fd.get(), 0, BlockWith("KDMV")), EPERM);
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["refused_header_writes"],
              6u);
    // Nothing reached the image: it reads as before through the mount.
    EXPECT_EQ(FirstDifference(before, PreadAll(fd.get(), 0, kBlock)), "");
    // The magic anywhere but sector 0, and ordinary data at 0, go through.
    const std::string ordinary = PatternBytes(3, kBlock);
    EXPECT_EQ(WriteError(fd.get(), 0, ordinary), 0);
    EXPECT_EQ(WriteError(fd.get(), 512 * 8, BlockWith("QFI\xfb")), 0);
    EXPECT_EQ(WriteError(fd.get(), 512, BlockWith("QFI\xfb").substr(0, 512)),
              0);
    EXPECT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["refused_header_writes"],
              6u);
    fd.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  std::string head = ImageHead(image);
  EXPECT_EQ(head.substr(0, 512), PatternBytes(3, kBlock).substr(0, 512));
  EXPECT_EQ(head.substr(512, 4), std::string("QFI\xfb", 4));
}

TEST_P(HeaderGuardTest, FormatRawServesTheWriteAsItIs) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 4 * kMiB);
  const std::string block = BlockWith("QFI\xfb");
  {
    Mount mount(dir.MakeDir("mnt"), MountArgs(image + ",format=raw"));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    EXPECT_EQ(WriteError(fd.get(), 0, block), 0) << std::strerror(errno);
    EXPECT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["refused_header_writes"],
              0u);
    fd.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  EXPECT_EQ(FirstDifference(block, ImageHead(image)), "");
  // The file now starts with a qcow2 header: probed, the mount refuses it;
  // format=raw serves it raw again, with its bytes as they are.
  {
    Mount probed(dir.MakeDir("mnt2"), MountArgs(image));
    EXPECT_FALSE(probed.ok());
    EXPECT_NE(probed.mount_result().err.find("qcow2"), std::string::npos)
        << probed.mount_result().Describe();
  }
  Mount raw(dir.MakeDir("mnt3"), MountArgs(image + ",format=raw"));
  ASSERT_TRUE(raw.ok()) << raw.mount_result().Describe();
  {
    Fd fd = Open(raw.Path("disk0.img"), O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(block, PreadAll(fd.get(), 0, kBlock)), "");
  }
  EXPECT_EQ(raw.Unmount().exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, HeaderGuardTest,
                         ::testing::Values("thread", "process"),
                         [](const auto& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
