// What a mount shows: the files, their sizes, and read-only disks.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::set<std::string> ListDir(const std::string& path) {
  std::set<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    ADD_FAILURE() << "opendir " << path << ": " << std::strerror(errno);
    return names;
  }
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.insert(name);
  }
  closedir(dir);
  return names;
}

void ExpectRegularFile(const std::string& path, uint64_t size) {
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << path;
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size) << path;
}

TEST(MountTest, ShowsDiskWithExactSizeAndStatsFiles) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  // Not a multiple of 1 MiB, so that the size is really the image's.
  const uint64_t size = 64 * kMiB + 512 * 3;
  CreateImage(dir.Path("disk0.img"), size);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img")});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  EXPECT_NE(mount.mount_result().out.find("disk0.img"), std::string::npos)
      << mount.mount_result().out;

  ExpectRegularFile(mount.Path("disk0.img"), size);
  ExpectRegularFile(mount.Path("stats"), 0);
  ExpectRegularFile(mount.Path("stats.json"), 0);
  struct stat st;
  ASSERT_EQ(stat(mount.mountpoint().c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(
      ListDir(mount.mountpoint()),
      (std::set<std::string>{"disk0.img", "stats", "stats.json", "metrics"}));
  struct stat missing;
  EXPECT_EQ(stat(mount.Path("nope.img").c_str(), &missing), -1);
  EXPECT_EQ(errno, ENOENT);

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["size"], std::to_string(size));
  EXPECT_EQ(stats.config["engine"], "uring");
  EXPECT_EQ(stats.config["read_only"], "no");
  // Without flags the transport is the one `pvdisk mount --help` documents.
  EXPECT_EQ(stats.config["frontend"], MountFlagDefault("frontend"));
  EXPECT_EQ(stats.config["ring_size"], MountFlagDefault("ring-size"));
  // The uring channel's default placement drives the queues inline: one
  // per CPU, mapped by CPU (see --placement).
  const bool inline_placement = DefaultPlacement(stats) == "inline";
  EXPECT_EQ(stats.config["placement"], DefaultPlacement(stats));
  EXPECT_EQ(stats.config["queue_map"],
            inline_placement ? "cpu" : MountFlagDefault("queue-map"));
  EXPECT_EQ(stats.config["backend_threads"],
            MountFlagDefault("backend-threads"));
  EXPECT_EQ(stats.config["max_segments"], MountFlagDefault("max-segments"));
  EXPECT_EQ(stats.config["persistent"], MountFlagDefault("persistent"));
  EXPECT_EQ(stats.config["notify"], MountFlagDefault("notify"));
  EXPECT_EQ(stats.config["poll_us"], MountFlagDefault("poll-us"));
  EXPECT_EQ(stats.config["engine_max_inflight"],
            MountFlagDefault("engine-max-inflight"));
  const size_t queues = DefaultQueueCount(stats);
  EXPECT_EQ(ConfigNumber(stats, "queues"), queues);
  EXPECT_EQ(stats.queues.size(), queues);
}

TEST(MountTest, TwoDisksAppearWithTheirSizesAndStatsSections) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("a.img"), 8 * kMiB);
  CreateImage(dir.Path("b.img"), 24 * kMiB + 512);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("a.img"), "--disk", dir.Path("b.img")});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  EXPECT_EQ(ListDir(mount.mountpoint()),
            (std::set<std::string>{"a.img", "b.img", "stats", "stats.json",
                                   "metrics"}));
  ExpectRegularFile(mount.Path("a.img"), 8 * kMiB);
  ExpectRegularFile(mount.Path("b.img"), 24 * kMiB + 512);

  // I/O on one disk shows up in its own section only.
  {
    Fd fd = Open(mount.Path("b.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 4096, std::string(4096, 'b'));
  }
  std::vector<DiskStats> disks = ReadStats(mount.mountpoint());
  ASSERT_EQ(disks.size(), 2u);
  EXPECT_EQ(disks[0].name, "a.img");
  EXPECT_EQ(disks[1].name, "b.img");
  EXPECT_EQ(disks[0].config["size"], std::to_string(8 * kMiB));
  EXPECT_EQ(disks[1].config["size"], std::to_string(24 * kMiB + 512));
  EXPECT_EQ(disks[0]["fuse_writes"], 0u);
  EXPECT_EQ(disks[0]["reqs_write"], 0u);
  EXPECT_GT(disks[1]["fuse_writes"], 0u);
  EXPECT_GT(disks[1]["reqs_write"], 0u);

  std::string text = ReadWholeFile(mount.Path("stats"));
  EXPECT_NE(text.find("# disk a.img:"), std::string::npos) << text;
  EXPECT_NE(text.find("# disk b.img:"), std::string::npos) << text;
  EXPECT_LT(text.find("# disk a.img:"), text.find("# disk b.img:")) << text;
}

TEST(MountTest, ReadOnlyDiskReadsButRefusesWriting) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const uint64_t size = 8 * kMiB;
  const std::string image = dir.Path("disk0.img");
  std::string contents = PatternBytes(12, size);
  WriteWholeFile(image, contents);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",ro"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string disk = mount.Path("disk0.img");

  struct stat st;
  ASSERT_EQ(stat(disk.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "mode " << std::oct << st.st_mode;

  {
    Fd fd = Open(disk, O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    std::string head = PreadAll(fd.get(), 0, 100000, 7001);
    EXPECT_EQ(FirstDifference(contents.substr(0, 100000), head), "");
    std::string odd = PreadAll(fd.get(), 3 * kMiB + 77, 5000);
    EXPECT_EQ(FirstDifference(contents.substr(3 * kMiB + 77, 5000), odd,
                              3 * kMiB + 77),
              "");
  }
  errno = 0;
  Fd rw = Open(disk, O_RDWR);
  EXPECT_FALSE(rw.valid());
  EXPECT_EQ(errno, EROFS) << std::strerror(errno);
  errno = 0;
  Fd wo = Open(disk, O_WRONLY);
  EXPECT_FALSE(wo.valid());
  EXPECT_EQ(errno, EROFS) << std::strerror(errno);

  EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img").config["read_only"],
            "yes");
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  std::string after = ReadWholeFile(image);
  EXPECT_EQ(FirstDifference(contents, after), "") << "the image changed";
}

}  // namespace
}  // namespace pvdisk::fuse_testing
