// Hole punches of 2 TiB and more through the mount, beyond what one
// virtio-blk discard segment (32 bits of sectors) can carry: on a sparse 3 TiB
// image, fallocate(PUNCH_HOLE) of ranges just below, at and above 2^32 sectors
// must punch the whole range under every frontend (virtio splits it at
// max_discard_sectors, counted as `splits`), and leave the bytes past it alone.
// Only holes are punched: zeroing terabytes would allocate them.
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kTiB = uint64_t{1} << 40;
constexpr uint64_t kImageBytes = 3 * kTiB;

class BigDiscardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BigDiscardTest, PunchAroundTwoTebibytesLeavesOnlyZerosInTheRange) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("big.img");
  CreateImage(image, kImageBytes);
  {
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image, "--frontend", GetParam()});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("big.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    // Below (2 TiB - 4 KiB), at (2 TiB = 2^32 sectors) and above (3 TiB).
    for (uint64_t length : {2 * kTiB - 4096, 2 * kTiB, kImageBytes}) {
      SCOPED_TRACE(::testing::Message() << "punch of " << length << " bytes");
      // A 4 KiB pattern on the range's last block, at 2 TiB, and on the
      // first block after the range (if any).
      std::vector<uint64_t> blocks = {length - 4096, 2 * kTiB};
      if (length < kImageBytes) blocks.push_back(length);
      for (uint64_t block : blocks) {
        PwriteAll(fd.get(), block, PatternBytes(block, 4096));
      }
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
      ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                          0, static_cast<off_t>(length)),
                0)
          << std::strerror(errno);
      for (uint64_t block : blocks) {
        const std::string expected = block < length ? std::string(4096, '\0')
                                                    : PatternBytes(block, 4096);
        EXPECT_EQ(
            FirstDifference(expected, PreadAll(fd.get(), block, 4096), block),
            "")
            << (block < length ? "not punched" : "punched past the range");
      }
    }
    const DiskStats stats = StatsOf(mount.mountpoint(), "big.img");
    EXPECT_EQ(stats["errors"], 0u);
    if (GetParam() != "blkif") {  // both virtio ring layouts
      // 2 TiB and 3 TiB each need two requests.
      EXPECT_GE(stats["splits"], 2u);
    }
    ASSERT_EQ(fd.Close(), 0);
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  // And in the image itself, read without the mount.
  Fd raw = Open(image, O_RDONLY);
  ASSERT_TRUE(raw.valid());
  EXPECT_EQ(PreadAll(raw.get(), 2 * kTiB, 4096), std::string(4096, '\0'));
  EXPECT_EQ(PreadAll(raw.get(), kImageBytes - 4096, 4096),
            std::string(4096, '\0'));
}

INSTANTIATE_TEST_SUITE_P(Frontends, BigDiscardTest,
                         ::testing::ValuesIn(AllFrontends()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return FrontendTestName(info.param);
                         });
// nvme: Dataset Management (deallocate) ranges of 2^32 - 8 blocks.
INSTANTIATE_TEST_SUITE_P(Nvme, BigDiscardTest, ::testing::Values("nvme"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return FrontendTestName(info.param);
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
