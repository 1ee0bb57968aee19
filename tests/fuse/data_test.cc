// Data through the mount with plain system calls: unaligned reads and
// writes, the end of the disk, fsync, hole punching, and the null engine.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// `pvdisk mount` arguments for one disk served by `param`'s frontend and
// engine.
std::vector<std::string> DiskArgs(const std::string& image,
                                  const FrontendEngine& param) {
  const auto& [frontend, engine] = param;
  return {"--disk", image, "--frontend", frontend, "--engine", engine};
}

// Pseudo-random bytes none of which is zero, so that zeros mean "punched".
std::string NonZeroBytes(uint64_t seed, size_t length) {
  std::string bytes = PatternBytes(seed, length);
  for (char& c : bytes) c = static_cast<char>(c | 0x01);
  return bytes;
}

// ---------------------------------------------------------------------------
// Unaligned pwrite / pread, checked through the mount and in the image.

class UnalignedIoTest : public ::testing::TestWithParam<FrontendEngine> {};

TEST_P(UnalignedIoTest, PatternSurvivesOddOffsetsAndLengths) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const uint64_t size = 16 * kMiB;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, size);
  std::string model(size, '\0');  // what the disk must hold
  {
    Mount mount(dir.MakeDir("mnt"), DiskArgs(image, GetParam()));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);

    struct Write {
      uint64_t offset;
      uint64_t length;
    };
    const std::vector<Write> writes = {
        {1, 1},
        {511, 2},           // across the first sector boundary
        {4095, 8193},       // from the last byte of a page to a page end
        {1000000, 300000},  // unaligned both ends
        {1000100, 50},      // inside the previous write
        {3 * kMiB + 123, 2 * kMiB + 512 * 1024 + 7},  // > one FUSE request
        {7 * kMiB - 5, 10},                           // across a MiB boundary
        {9 * kMiB, 512 * 3},                          // aligned, for contrast
        {9 * kMiB + 512 * 3, 1},                      // the byte right after it
        {size - 777, 777},  // the last bytes of the disk
        {size - 1, 1},      // the very last byte
    };
    uint64_t seed = 1;
    for (const Write& w : writes) {
      std::string data = PatternBytes(seed++, w.length);
      ssize_t n = pwrite(fd.get(), data.data(), data.size(),
                         static_cast<off_t>(w.offset));
      ASSERT_EQ(n, static_cast<ssize_t>(w.length))
          << "pwrite at " << w.offset << ": " << std::strerror(errno);
      model.replace(w.offset, w.length, data);
    }

    // Single bytes around the edges.
    for (uint64_t offset : std::vector<uint64_t>{
             0, 1, 2, 510, 511, 512, 513, 4095, 12288, size - 778, size - 1}) {
      char byte = 0x7f;
      ASSERT_EQ(pread(fd.get(), &byte, 1, static_cast<off_t>(offset)), 1)
          << offset << ": " << std::strerror(errno);
      EXPECT_EQ(byte, model[offset]) << "byte at " << offset;
    }
    // The written areas with odd splits, then the whole disk.
    for (uint64_t chunk : std::vector<uint64_t>{7777, 4097, 333333}) {
      std::string head = PreadAll(fd.get(), 1, 1400000, chunk);
      EXPECT_EQ(
          FirstDifference(std::string_view(model).substr(1, 1400000), head, 1),
          "")
          << "chunk " << chunk;
    }
    std::string tail = PreadAll(fd.get(), size - 10001, 10001, 999);
    EXPECT_EQ(FirstDifference(std::string_view(model).substr(size - 10001),
                              tail, size - 10001),
              "");
    std::string whole = PreadAll(fd.get(), 0, size, kMiB + 3);
    EXPECT_EQ(FirstDifference(model, whole), "") << "through the mount";

    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats.config["frontend"], std::get<0>(GetParam()));
    EXPECT_EQ(stats.config["engine"], std::get<1>(GetParam()));
    EXPECT_GE(stats["fuse_writes"], writes.size());
    EXPECT_GT(stats["reqs_read"], 0u) << "unaligned writes read first";
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(stats["invalid_reqs"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);

    ASSERT_EQ(fd.Close(), 0);
    CommandResult unmounted = mount.Unmount();
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  struct stat st;
  ASSERT_EQ(stat(image.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
  std::string in_image = ReadWholeFile(image);
  EXPECT_EQ(FirstDifference(model, in_image), "") << "in the image file";
}

INSTANTIATE_TEST_SUITE_P(FrontendsAndEngines, UnalignedIoTest,
                         FrontendsTimesEngines({"uring", "sync"}),
                         FrontendEngineName);

// ---------------------------------------------------------------------------
// The end of the disk.

class EndOfDiskTest : public ::testing::TestWithParam<FrontendEngine> {};

TEST_P(EndOfDiskTest, ReadsStopAtTheEndAndWritesPastItFail) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  // Three sectors past a page boundary, so the last page is a partial one.
  const uint64_t size = 8 * kMiB + 3 * 512;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, size);
  const std::string last = NonZeroBytes(7, 8192);
  {
    Mount mount(dir.MakeDir("mnt"), DiskArgs(image, GetParam()));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), size - last.size(), last);

    char buffer[8192];
    EXPECT_EQ(pread(fd.get(), buffer, 100, static_cast<off_t>(size)), 0);
    EXPECT_EQ(pread(fd.get(), buffer, 4096, static_cast<off_t>(size + 4096)),
              0);
    ssize_t n = pread(fd.get(), buffer, 4096, static_cast<off_t>(size - 100));
    ASSERT_EQ(n, 100) << std::strerror(errno);
    EXPECT_EQ(std::string(buffer, 100), last.substr(last.size() - 100));
    n = pread(fd.get(), buffer, 8192, static_cast<off_t>(size - 4096 - 3));
    ASSERT_EQ(n, 4099) << std::strerror(errno);
    EXPECT_EQ(std::string(buffer, 4099), last.substr(last.size() - 4099));

    const std::string junk(4096, 'J');
    errno = 0;
    EXPECT_EQ(pwrite(fd.get(), junk.data(), junk.size(),
                     static_cast<off_t>(size - 100)),
              -1);
    EXPECT_EQ(errno, ENOSPC) << std::strerror(errno);
    errno = 0;
    EXPECT_EQ(pwrite(fd.get(), junk.data(), 1, static_cast<off_t>(size)), -1);
    EXPECT_EQ(errno, ENOSPC) << std::strerror(errno);
    errno = 0;
    EXPECT_EQ(
        pwrite(fd.get(), junk.data(), 512, static_cast<off_t>(size + kMiB)),
        -1);
    EXPECT_EQ(errno, ENOSPC) << std::strerror(errno);
    // Nothing of the refused writes landed.
    std::string tail = PreadAll(fd.get(), size - last.size(), last.size());
    EXPECT_EQ(FirstDifference(last, tail, size - last.size()), "");

    struct stat st;
    ASSERT_EQ(fstat(fd.get(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), size) << "the disk grew";
    ASSERT_EQ(fd.Close(), 0);
    CommandResult unmounted = mount.Unmount();
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  struct stat st;
  ASSERT_EQ(stat(image.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size) << "the image grew";
  Fd fd = Open(image, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(FirstDifference(
                last, PreadAll(fd.get(), size - last.size(), last.size())),
            "");
}

INSTANTIATE_TEST_SUITE_P(Nvme, UnalignedIoTest,
                         ::testing::Values(FrontendEngine("nvme", "uring")),
                         FrontendEngineName);

INSTANTIATE_TEST_SUITE_P(FrontendsAndEngines, EndOfDiskTest,
                         FrontendsTimesEngines({"uring", "sync"}),
                         FrontendEngineName);
INSTANTIATE_TEST_SUITE_P(Nvme, EndOfDiskTest,
                         ::testing::Values(FrontendEngine("nvme", "uring")),
                         FrontendEngineName);

// ---------------------------------------------------------------------------
// fsync and close.

class FsyncTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FsyncTest, FsyncSendsAFlushAndCloseWithoutFsyncWorks) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const uint64_t size = 8 * kMiB;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, size);
  const std::string synced = PatternBytes(21, 10000);
  const std::string closed = PatternBytes(22, 5000);
  {
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image, "--frontend", GetParam()});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    const std::string disk = mount.Path("disk0.img");
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img").config["frontend"],
              GetParam());
    {
      Fd fd = Open(disk, O_RDWR);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), 4096, synced);
      uint64_t before = StatsOf(mount.mountpoint(), "disk0.img")["reqs_flush"];
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
      uint64_t after_fsync =
          StatsOf(mount.mountpoint(), "disk0.img")["reqs_flush"];
      EXPECT_GT(after_fsync, before);
      ASSERT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);
      EXPECT_GT(StatsOf(mount.mountpoint(), "disk0.img")["reqs_flush"],
                after_fsync);
      ASSERT_EQ(fd.Close(), 0) << std::strerror(errno);
    }
    {
      Fd fd = Open(disk, O_WRONLY);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), 2 * kMiB + 1, closed);
      EXPECT_EQ(fd.Close(), 0) << std::strerror(errno);
    }
    {
      Fd fd = Open(disk, O_RDONLY);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      EXPECT_EQ(
          FirstDifference(synced, PreadAll(fd.get(), 4096, synced.size())), "");
      EXPECT_EQ(FirstDifference(
                    closed, PreadAll(fd.get(), 2 * kMiB + 1, closed.size())),
                "");
    }
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats["errors"], 0u);
    CommandResult unmounted = mount.Unmount();
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  Fd fd = Open(image, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(FirstDifference(synced, PreadAll(fd.get(), 4096, synced.size())),
            "");
  EXPECT_EQ(
      FirstDifference(closed, PreadAll(fd.get(), 2 * kMiB + 1, closed.size())),
      "");
}

INSTANTIATE_TEST_SUITE_P(Frontends, FsyncTest,
                         ::testing::ValuesIn(OfferedFrontends()),
                         [](const auto& info) {
                           return FrontendTestName(info.param);
                         });

// ---------------------------------------------------------------------------
// fallocate: punch hole and zero range.

class FallocateTest : public ::testing::TestWithParam<FrontendEngine> {};

TEST_P(FallocateTest, PunchedAndZeroedRangesReadZerosNeighboursIntact) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const uint64_t size = 16 * kMiB;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, size);
  std::string model(size, '\0');
  {
    Mount mount(dir.MakeDir("mnt"), DiskArgs(image, GetParam()));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);

    const std::string data = NonZeroBytes(31, kMiB);
    PwriteAll(fd.get(), kMiB, data);
    model.replace(kMiB, kMiB, data);
    const std::string tail = NonZeroBytes(32, 4096);
    PwriteAll(fd.get(), size - 4096, tail);
    model.replace(size - 4096, 4096, tail);
    uint64_t discards_before =
        StatsOf(mount.mountpoint(), "disk0.img")["reqs_discard"];

    struct Range {
      int mode;
      uint64_t offset;
      uint64_t length;
    };
    const int kPunch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    const std::vector<Range> ranges = {
        {kPunch, kMiB + 64 * 1024, 128 * 1024},  // aligned
        {kPunch, kMiB + 300001, 70001},          // unaligned both ends
        {kPunch, kMiB + 512 * 1000 + 10, 100},   // inside one sector
        {kPunch, kMiB + 512 * 1100 - 7, 14},     // across one sector boundary
        {FALLOC_FL_ZERO_RANGE, kMiB + 700003, 9999},
        {FALLOC_FL_ZERO_RANGE, kMiB + 900 * 1024, 8192},
        {FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, kMiB + kMiB - 1, 1},
    };
    for (const Range& r : ranges) {
      ASSERT_EQ(fallocate(fd.get(), r.mode, static_cast<off_t>(r.offset),
                          static_cast<off_t>(r.length)),
                0)
          << "mode " << r.mode << " at " << r.offset << " length " << r.length
          << ": " << std::strerror(errno);
      model.replace(r.offset, r.length, std::string(r.length, '\0'));
    }
    // A hole running past the end (with KEEP_SIZE) zeroes up to the end.
    ASSERT_EQ(
        fallocate(fd.get(), kPunch, static_cast<off_t>(size - 1000), 5000), 0)
        << std::strerror(errno);
    model.replace(size - 1000, 1000, std::string(1000, '\0'));

    std::string region = PreadAll(fd.get(), 0, 3 * kMiB, 65537);
    EXPECT_EQ(
        FirstDifference(std::string_view(model).substr(0, 3 * kMiB), region),
        "");
    std::string end = PreadAll(fd.get(), size - 4096, 4096);
    EXPECT_EQ(FirstDifference(std::string_view(model).substr(size - 4096), end,
                              size - 4096),
              "");
    EXPECT_GT(StatsOf(mount.mountpoint(), "disk0.img")["reqs_discard"],
              discards_before);

    // Allocation within the disk is a no-op; growing it is impossible.
    EXPECT_EQ(fallocate(fd.get(), 0, 0, 4096), 0) << std::strerror(errno);
    errno = 0;
    EXPECT_EQ(fallocate(fd.get(), 0, static_cast<off_t>(size - 4096), 8192),
              -1);
    EXPECT_EQ(errno, ENOSPC) << std::strerror(errno);
    errno = 0;
    EXPECT_EQ(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE,
                        static_cast<off_t>(size - 512), 4096),
              -1);
    EXPECT_EQ(errno, ENOSPC) << std::strerror(errno);
    struct stat st;
    ASSERT_EQ(fstat(fd.get(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
    // The refused zero range changed nothing.
    end = PreadAll(fd.get(), size - 4096, 4096);
    EXPECT_EQ(FirstDifference(std::string_view(model).substr(size - 4096), end,
                              size - 4096),
              "");

    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(stats["invalid_reqs"], 0u);
    ASSERT_EQ(fd.Close(), 0);
    CommandResult unmounted = mount.Unmount();
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  std::string in_image = ReadWholeFile(image);
  EXPECT_EQ(FirstDifference(model, in_image), "") << "in the image file";
}

INSTANTIATE_TEST_SUITE_P(FrontendsAndEngines, FallocateTest,
                         FrontendsTimesEngines({"uring", "sync"}),
                         FrontendEngineName);
INSTANTIATE_TEST_SUITE_P(Nvme, FallocateTest,
                         ::testing::Values(FrontendEngine("nvme", "uring")),
                         FrontendEngineName);

// ---------------------------------------------------------------------------
// The null engine: reads give zeros, writes change nothing.

class NullEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NullEngineTest, ReadsZerosAndWritesLeaveTheImageAlone) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const uint64_t size = 64 * kMiB;
  const std::string image = dir.Path("disk0.img");
  FillFile(image, size, 0x5A);
  {
    Mount mount(dir.MakeDir("mnt"), DiskArgs(image, {GetParam(), "null"}));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    const std::string disk = mount.Path("disk0.img");
    DiskStats initial = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(initial.config["engine"], "null");
    EXPECT_EQ(initial.config["frontend"], GetParam());

    CommandResult read = RunCommand(
        FioCommand(disk, {"--rw=randread", "--bs=64k", "--iodepth=16",
                          "--size=64M", "--runtime=5"}));
    EXPECT_EQ(read.exit_code, 0) << read.Describe();

    Fd fd = Open(disk, O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    for (uint64_t offset :
         std::vector<uint64_t>{0, kMiB + 3, 37 * kMiB + 4096, size - 4096}) {
      std::string block = PreadAll(fd.get(), offset, 4096);
      EXPECT_EQ(FirstDifference(std::string(4096, '\0'), block, offset), "");
    }
    const std::string data = PatternBytes(41, 10000);
    ASSERT_EQ(pwrite(fd.get(), data.data(), data.size(), 8 * kMiB + 5),
              static_cast<ssize_t>(data.size()))
        << std::strerror(errno);
    EXPECT_EQ(FirstDifference(std::string(data.size(), '\0'),
                              PreadAll(fd.get(), 8 * kMiB + 5, data.size()),
                              8 * kMiB + 5),
              "");
    EXPECT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    ASSERT_EQ(fd.Close(), 0);

    CommandResult write = RunCommand(
        FioCommand(disk, {"--rw=randwrite", "--bs=64k", "--iodepth=16",
                          "--size=64M", "--runtime=5"}));
    EXPECT_EQ(write.exit_code, 0) << write.Describe();

    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_GT(stats["reqs_read"], 0u);
    EXPECT_GT(stats["reqs_write"], 0u);
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);
    CommandResult unmounted = mount.Unmount();
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  struct stat st;
  ASSERT_EQ(stat(image.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
  std::string in_image = ReadWholeFile(image);
  EXPECT_EQ(FirstDifference(std::string(size, '\x5A'), in_image), "")
      << "the null engine changed the image";
}

INSTANTIATE_TEST_SUITE_P(Frontends, NullEngineTest,
                         ::testing::ValuesIn(AllFrontends()),
                         [](const auto& info) {
                           return FrontendTestName(info.param);
                         });
INSTANTIATE_TEST_SUITE_P(Nvme, NullEngineTest, ::testing::Values("nvme"),
                         [](const auto& info) {
                           return FrontendTestName(info.param);
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
