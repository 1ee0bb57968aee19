// kill -9 loses nothing that was fsynced (an fsync returns only once the
// image's file system has the data): numbered blocks are written through the
// mount with an fsync after every batch; the last block whose fsync returned is
// recorded in the test process (outside the mount); the daemon is killed with
// SIGKILL mid-stream, `pvdisk unmount` detaches the dead mount, and every
// fsynced block must be in the image. Every frontend, with persistent grants on
// and off.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <tuple>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlockSize = 4096;
constexpr uint64_t kImageSize = 64 * kMiB;
constexpr uint64_t kBlocks = kImageSize / kBlockSize;
constexpr uint64_t kBatch = 16;  // blocks between two fsyncs

// Block `n`: its number in the first 8 bytes, then bytes made from it.
std::string Block(uint64_t n) {
  std::string block = PatternBytes(0x6b696c6c00000000ULL + n, kBlockSize);
  std::memcpy(block.data(), &n, sizeof(n));
  return block;
}

// (frontend, persistent)
using KillParam = std::tuple<std::string, std::string>;

class KillDurabilityTest : public ::testing::TestWithParam<KillParam> {};

TEST_P(KillDurabilityTest, EveryFsyncedBlockSurvivesSigkill) {
  PVDISK_REQUIRE_FUSE();
  const auto& [frontend, persistent] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageSize);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--frontend", frontend,
                                   "--persistent", persistent});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  Fd fd = Open(mount.Path("disk0.img"), O_WRONLY);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);

  // Blocks [0, synced) are durable: their fsync returned 0.
  std::atomic<int64_t> synced{0};
  std::atomic<uint64_t> written{0};
  std::atomic<int> stop_errno{0};
  std::thread writer([&] {
    for (uint64_t n = 0; n < kBlocks; ++n) {
      std::string block = Block(n);
      if (pwrite(fd.get(), block.data(), kBlockSize, n * kBlockSize) !=
          static_cast<ssize_t>(kBlockSize)) {
        stop_errno = errno;
        return;
      }
      written = n + 1;
      if ((n + 1) % kBatch == 0) {
        if (fsync(fd.get()) != 0) {
          stop_errno = errno;
          return;
        }
        synced = static_cast<int64_t>(n + 1);
      }
    }
  });
  // Kill once a fair number of blocks is durable (a quarter of the disk),
  // while a batch is half written.
  bool going = WaitUntil(
      [&] {
        return synced.load() >= static_cast<int64_t>(kBlocks / 4) &&
               written.load() % kBatch >= kBatch / 2;
      },
      std::chrono::seconds(60));
  ASSERT_EQ(kill(mount.daemon_pid(), SIGKILL), 0) << std::strerror(errno);
  writer.join();  // the dead mount fails its calls: the writer stops
  ASSERT_TRUE(going) << "the writer made no progress: " << written.load()
                     << " written, " << synced.load() << " synced";
  EXPECT_NE(stop_errno.load(), 0) << "the writer never saw the daemon die";
  fd.Close();
  ASSERT_TRUE(WaitUntil([&] { return !PvdiskProcessAlive(mount.daemon_pid()); },
                        std::chrono::seconds(10)));
  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_FALSE(IsMounted(mount.mountpoint()));

  Fd image_fd = Open(image, O_RDONLY);
  ASSERT_TRUE(image_fd.valid()) << std::strerror(errno);
  const uint64_t durable = static_cast<uint64_t>(synced.load());
  std::string contents = PreadAll(image_fd.get(), 0, durable * kBlockSize);
  uint64_t bad = 0;
  std::string first_bad;
  for (uint64_t n = 0; n < durable; ++n) {
    std::string_view got(contents.data() + n * kBlockSize, kBlockSize);
    if (got == Block(n)) continue;
    if (bad++ == 0) first_bad = FirstDifference(Block(n), got, n * kBlockSize);
  }
  std::cout << "[          ] " << durable << " blocks fsynced, "
            << written.load() << " written when the daemon was killed; " << bad
            << " fsynced blocks missing\n";
  EXPECT_EQ(bad, 0u) << bad << " of " << durable
                     << " fsynced blocks are not in the image; first: "
                     << first_bad;
}

std::string KillName(const ::testing::TestParamInfo<KillParam>& info) {
  return FrontendTestName(std::get<0>(info.param)) + "_persistent_" +
         std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(FrontendsAndPersistence, KillDurabilityTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values("on", "off")),
                         KillName);
// nvme with pages mapped per request (the harder of the two).
INSTANTIATE_TEST_SUITE_P(Nvme, KillDurabilityTest,
                         ::testing::Values(KillParam("nvme", "off")), KillName);

}  // namespace
}  // namespace pvdisk::fuse_testing
