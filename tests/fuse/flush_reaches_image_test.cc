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

}  // namespace
}  // namespace pvdisk::fuse_testing
