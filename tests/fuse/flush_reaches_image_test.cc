// A flush asked of pvdisk reaches the file system the image lives on. The
// image is kept on flush_counting_fs (a FUSE file system of the tests' own
// that counts the FSYNC requests per file); fsync and fdatasync through the
// pvdisk mount must each make at least one FSYNC of the image arrive there,
// after the bytes written before it, with those bytes in the backing file.
// Return codes and pvdisk's own counters cannot show this: an engine whose
// flush does nothing still answers 0 and counts the request.
//
// Every engine that flushes a file (uring, sync; the delay decorator over
// uring on blkif and on nvme) in every placement (inline, which the
// classic channel does not have, backend-thread, backend-process), each
// frontend once, on the channel of the suite's run. The null engine is the
// control: its flush is answered and counted, and no FSYNC reaches the
// image, so the count rises only when an engine really flushes. rbd keeps
// no file (its flush is librbd's), so it is not here.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "flush_counting_mount.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr char kImage[] = "disk0.img";

struct FlushCase {
  std::string name;
  std::string engine;
  // "inline", "backend-thread", "backend-process" (--backend process), or
  // "" for the mount's default.
  std::string placement;
  std::vector<std::string> extra;  // more mount flags
  std::string disk_options;        // appended to the --disk path
  bool flushes_file = true;        // false: the null engine
};

void PrintTo(const FlushCase& flush_case, std::ostream* out) {
  *out << flush_case.name;
}

std::vector<FlushCase> Cases() {
  std::vector<FlushCase> cases;
  for (const std::string engine : {"uring", "sync"}) {
    for (const std::string placement :
         {"inline", "backend-thread", "backend-process"}) {
      FlushCase c;
      c.engine = engine;
      c.placement = placement;
      c.name = engine + "_" + placement;
      cases.push_back(c);
    }
  }
  FlushCase delayed;
  delayed.name = "uring_delay_backend_thread";
  delayed.engine = "uring";
  delayed.placement = "backend-thread";
  delayed.disk_options = ",delay=200";
  cases.push_back(delayed);
  FlushCase delayed_nvme = delayed;
  delayed_nvme.name = "uring_delay_backend_thread_nvme";
  delayed_nvme.extra = {"--frontend", "nvme"};
  cases.push_back(delayed_nvme);
  for (const std::string& frontend : OfferedFrontends()) {
    FlushCase c;
    c.name = "uring_default_placement_" + FrontendTestName(frontend);
    c.engine = "uring";
    c.extra = {"--frontend", frontend};
    cases.push_back(c);
  }
  FlushCase null_case;
  null_case.name = "null_control";
  null_case.engine = "null";
  null_case.flushes_file = false;
  cases.push_back(null_case);
  for (FlushCase& c : cases) {
    for (char& ch : c.name) {
      if (ch == '-') ch = '_';
    }
  }
  return cases;
}

uint64_t Syncs(const FileTally& tally) { return tally.fsync + tally.fdatasync; }

class FlushReachesImageTest : public ::testing::TestWithParam<FlushCase> {};

TEST_P(FlushReachesImageTest, FsyncThroughTheMountFsyncsTheImageFile) {
  PVDISK_REQUIRE_FUSE();
  const FlushCase& param = GetParam();
  if (param.placement == "inline" && TestFuseIo() == "classic") {
    GTEST_SKIP() << "--placement inline needs the uring channel";
  }
  TempDir dir;
  const std::string backing = dir.MakeDir("backing");
  CreateImage(backing + "/" + kImage, 8 * kMiB);
  FlushCountingMount image_fs(backing, dir.MakeDir("imagefs"));
  ASSERT_TRUE(image_fs.ok()) << image_fs.Describe();
  {
    std::vector<std::string> args = {"--disk",
                                     image_fs.Path(kImage) + param.disk_options,
                                     "--engine", param.engine};
    if (param.placement == "backend-process") {
      args.insert(args.end(), {"--backend", "process"});
    } else if (!param.placement.empty()) {
      args.insert(args.end(), {"--placement", param.placement});
    }
    args.insert(args.end(), param.extra.begin(), param.extra.end());
    Mount mount(dir.MakeDir("mnt"), args);
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

    DiskStats stats = StatsOf(mount.mountpoint(), kImage);
    EXPECT_EQ(stats.config["engine"], param.engine);
    if (!param.placement.empty()) {
      EXPECT_EQ(stats.config["placement"], param.placement);
    }
    if (!TestFuseIo().empty()) {
      EXPECT_EQ(stats.config["fuse_io"], TestFuseIo());
    }
    if (param.flushes_file) {
      // The engines' real path: the image on a FUSE file system takes
      // O_DIRECT, so nothing falls back to buffered I/O here.
      EXPECT_EQ(stats.config["engine_mode"].rfind("O_DIRECT", 0), 0u)
          << stats.config["engine_mode"];
    }

    Fd fd = Open(mount.Path(kImage), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    Fd backing_fd = Open(backing + "/" + kImage, O_RDONLY);
    ASSERT_TRUE(backing_fd.valid()) << std::strerror(errno);
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round == 0 ? "fsync" : "fdatasync");
      const uint64_t offset = 4096 + static_cast<uint64_t>(round) * kMiB;
      const std::string data = PatternBytes(100 + round, 64 * 1024);
      const FileTally before = image_fs.CountsOf(kImage);
      const uint64_t flushes_before =
          StatsOf(mount.mountpoint(), kImage)["reqs_flush"];

      PwriteAll(fd.get(), offset, data);
      ASSERT_EQ(round == 0 ? fsync(fd.get()) : fdatasync(fd.get()), 0)
          << std::strerror(errno);

      const FileTally after = image_fs.CountsOf(kImage);
      // pvdisk was asked for a flush: this holds with any engine.
      EXPECT_GT(StatsOf(mount.mountpoint(), kImage)["reqs_flush"],
                flushes_before);
      if (param.flushes_file) {
        const bool synced = Syncs(after) > Syncs(before);
        EXPECT_TRUE(synced)
            << "fsync through the mount returned, but no FSYNC of the image "
               "reached its file system";
        // The FSYNC covered the write: it arrived after the write's bytes.
        if (synced) {
          EXPECT_GE(after.written_at_last_fsync, before.written + data.size())
              << "the image's FSYNC arrived before the write it must cover";
        }
        EXPECT_EQ(
            FirstDifference(
                data, PreadAll(backing_fd.get(), offset, data.size()), offset),
            "");
      } else {
        EXPECT_EQ(Syncs(after), Syncs(before))
            << "the null engine keeps nothing, yet the image was synced";
        EXPECT_EQ(after.written, before.written);
      }
    }
    EXPECT_EQ(StatsOf(mount.mountpoint(), kImage)["errors"], 0u);
    ASSERT_EQ(fd.Close(), 0) << std::strerror(errno);
    CommandResult unmounted = mount.Unmount();
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
}

INSTANTIATE_TEST_SUITE_P(EnginesAndPlacements, FlushReachesImageTest,
                         ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// Two disks on one FUSE queue thread (inline placement: both engines borrow
// the thread's ring). One flushes after every write, in a loop, while the
// other runs verified writes at depth 8 beside it: the flush then runs on
// the thread only when nothing else is on the ring, and goes to the ring
// otherwise (io/flush_policy.h). Either way every fdatasync through the
// mount must reach the first image's file system after the write it
// covers, with that write's bytes in the image, and the second disk's data
// must read back.
TEST(FlushBesideAnotherDiskTest,
     EveryFlushReachesItsImageWhileTheOtherDiskWorks) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  const std::string backing = dir.MakeDir("backing");
  CreateImage(backing + "/disk0.img", 8 * kMiB);
  CreateImage(backing + "/disk1.img", 8 * kMiB);
  FlushCountingMount image_fs(backing, dir.MakeDir("imagefs"));
  ASSERT_TRUE(image_fs.ok()) << image_fs.Describe();
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image_fs.Path("disk0.img"), "--disk",
               image_fs.Path("disk1.img"), "--fuse-io", "uring", "--placement",
               "inline"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  // Both on CPU 0: their requests come to the same FUSE queue thread.
  cpu_set_t cpu0;
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  cpu_set_t before_pin;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before_pin), &before_pin), 0);
  ASSERT_EQ(sched_setaffinity(0, sizeof(cpu0), &cpu0), 0);
  const std::vector<std::string> job = {
      "--rw=randwrite", "--bs=4k",         "--iodepth=8",     "--size=4M",
      "--loops=4",      "--verify=crc32c", "--cpus_allowed=0"};
  BackgroundProcess other(FioCommand(mount.Path("disk1.img"), job));
  ASSERT_TRUE(other.started());

  {
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    Fd backing_fd = Open(backing + "/disk0.img", O_RDONLY);
    ASSERT_TRUE(backing_fd.valid()) << std::strerror(errno);
    // At least 64 flushes, and as many more as the other disk's job lasts.
    int flushes = 0;
    bool other_done = false;
    for (; flushes < 64 || (!other_done && flushes < 4096); ++flushes) {
      SCOPED_TRACE("flush " + std::to_string(flushes));
      const uint64_t offset = static_cast<uint64_t>(flushes % 256) * 16384;
      const std::string data = PatternBytes(1000 + flushes, 4096);
      const FileTally before = image_fs.CountsOf("disk0.img");
      PwriteAll(fd.get(), offset, data);
      ASSERT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);
      const FileTally after = image_fs.CountsOf("disk0.img");
      ASSERT_GT(Syncs(after), Syncs(before))
          << "fdatasync through the mount returned, but no FSYNC of the "
             "image reached its file system";
      ASSERT_GE(after.written_at_last_fsync, before.written + data.size())
          << "the image's FSYNC arrived before the write it must cover";
      ASSERT_EQ(
          FirstDifference(data, PreadAll(backing_fd.get(), offset, data.size()),
                          offset),
          "");
      if (!other_done) other_done = other.Wait(std::chrono::milliseconds(0));
    }
    EXPECT_GE(StatsOf(mount.mountpoint(), "disk0.img")["reqs_flush"],
              static_cast<uint64_t>(flushes));
    ASSERT_EQ(fd.Close(), 0) << std::strerror(errno);
  }
  ASSERT_TRUE(other.Wait(std::chrono::seconds(120)));
  ExpectFioClean(other.result());
  ASSERT_EQ(sched_setaffinity(0, sizeof(before_pin), &before_pin), 0);
  for (const char* name : {"disk0.img", "disk1.img"}) {
    DiskStats stats = StatsOf(mount.mountpoint(), name);
    EXPECT_EQ(stats["errors"], 0u) << name;
    EXPECT_EQ(stats["inflight"], 0u) << name;
  }
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
}

}  // namespace
}  // namespace pvdisk::fuse_testing
