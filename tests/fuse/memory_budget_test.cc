// The memory budget: a configuration whose shared memory and io_uring rings
// would exceed --max-memory (default a quarter of RAM) is refused before
// anything exists; one within it mounts, and the stats header's
// shared_bytes is what the daemon really maps.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// The byte count in a refusal: "... needs 1.2 GiB of memory (N bytes) ...".
uint64_t NeededBytes(const std::string& message) {
  size_t needs = message.find("needs ");
  size_t open = message.find(" of memory (", needs);
  if (needs == std::string::npos || open == std::string::npos) {
    ADD_FAILURE() << "no computed size in: " << message;
    return 0;
  }
  return std::strtoull(message.c_str() + open + 12, nullptr, 10);
}

// What /proc/PID/maps lists of the daemon's shared regions (memfds named
// "pvdisk-..."): the bytes of every mapping, and the size of each memfd
// counted once (by inode). Each region is mapped twice, the frontend's and
// the backend's view, but is one piece of memory.
struct SharedMappings {
  uint64_t mapped_bytes = 0;
  std::map<std::string, uint64_t> memfd_sizes;  // by inode
};

SharedMappings SharedMappingsOf(pid_t pid) {
  SharedMappings found;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream words(line);
    std::string range, perms, offset, device, inode, path;
    words >> range >> perms >> offset >> device >> inode >> path;
    if (path.rfind("/memfd:pvdisk-", 0) != 0) continue;
    // A queue's counters (transport/shared_stats.h), not its region.
    if (path.size() > 6 && path.compare(path.size() - 6, 6, "-stats") == 0) {
      continue;
    }
    size_t dash = range.find('-');
    uint64_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    uint64_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    found.mapped_bytes += end - start;
    uint64_t extent = std::stoull(offset, nullptr, 16) + (end - start);
    found.memfd_sizes[inode] = std::max(found.memfd_sizes[inode], extent);
  }
  return found;
}

class MemoryBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PVDISK_REQUIRE_FUSE();
    image_ = dir_.Path("disk0.img");
    CreateImage(image_, 16 * kMiB);
  }
  TempDir dir_;
  std::string image_;
};

// The configuration that once grew to 22 GiB of shared memory on a 24 GiB
// machine and then could not unmount.
TEST_F(MemoryBudgetTest, RefusesAConfigurationAboveTheDefaultBudget) {
  std::string mountpoint = dir_.MakeDir("mnt");
  CommandResult result = RunPvdisk(
      {"mount", mountpoint, "--disk", image_, "--frontend", "virtio",
       "--queues", "64", "--ring-size", "32768", "--max-segments", "4096"},
      std::chrono::seconds(60));
  ExpectUsageError(result);
  for (const char* part : {"--queues 64", "--ring-size 32768",
                           "--max-segments 4096", "--max-memory"}) {
    EXPECT_NE(result.err.find(part), std::string::npos)
        << part << " missing in: " << result.err;
  }
  // 64 queues of a 32768-slot ring with 262144 data pages and 17 table
  // pages per slot: more than 200 GiB.
  EXPECT_GT(NeededBytes(result.err), uint64_t{200} << 30) << result.err;
  EXPECT_FALSE(IsMounted(mountpoint));
  EXPECT_TRUE(PvdiskProcessesMentioning(mountpoint).empty());
}

TEST_F(MemoryBudgetTest, MountsJustWithinTheBudgetAndShowsWhatItMaps) {
  const std::vector<std::string> flags = {
      "--frontend",  "virtio", "--queues",       "3",
      "--ring-size", "512",    "--max-segments", "64"};
  // The computed size, from the refusal under a budget far too small.
  std::string probe_point = dir_.MakeDir("probe");
  std::vector<std::string> probe = {"mount", probe_point,    "--disk",
                                    image_,  "--max-memory", "4K"};
  probe.insert(probe.end(), flags.begin(), flags.end());
  CommandResult refused = RunPvdisk(probe);
  ExpectUsageError(refused);
  uint64_t needed = NeededBytes(refused.err);
  ASSERT_GT(needed, 0u);
  EXPECT_FALSE(IsMounted(probe_point));

  // One byte short is refused; exactly the size mounts.
  probe[5] = std::to_string(needed - 1);
  refused = RunPvdisk(probe);
  ExpectUsageError(refused);
  EXPECT_EQ(NeededBytes(refused.err), needed);
  EXPECT_FALSE(IsMounted(probe_point));

  std::vector<std::string> args = {"--disk", image_, "--max-memory",
                                   std::to_string(needed)};
  args.insert(args.end(), flags.begin(), flags.end());
  Mount mount(dir_.MakeDir("mnt"), args);
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  uint64_t shared = ConfigNumber(stats, "shared_bytes");
  EXPECT_GT(shared, 0u);
  EXPECT_LE(shared, needed);

  SharedMappings maps = SharedMappingsOf(mount.daemon_pid());
  EXPECT_EQ(maps.memfd_sizes.size(), 3u) << "one shared region per queue";
  uint64_t memory = 0;
  for (const auto& [inode, size] : maps.memfd_sizes) memory += size;
  EXPECT_GE(memory, shared * 95 / 100) << "memfds: " << memory;
  EXPECT_LE(memory, shared * 105 / 100) << "memfds: " << memory;
  // Idle, with persistent grants: exactly the two views of each region.
  EXPECT_EQ(maps.mapped_bytes, 2 * memory);

  // It serves.
  Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
  ASSERT_TRUE(fd.valid());
  std::string data = PatternBytes(7, 256 * 1024);
  PwriteAll(fd.get(), 4096, data);
  EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), 4096, data.size())), "");
}

TEST_F(MemoryBudgetTest, BadMaxMemoryIsRefused) {
  std::string mountpoint = dir_.MakeDir("mnt");
  CommandResult result = RunPvdisk(
      {"mount", mountpoint, "--disk", image_, "--max-memory", "lots"});
  ExpectUsageError(result);
  EXPECT_NE(result.err.find("--max-memory"), std::string::npos)
      << result.Describe();
  EXPECT_FALSE(IsMounted(mountpoint));
}

}  // namespace
}  // namespace pvdisk::fuse_testing
