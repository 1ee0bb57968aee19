// Every engine in every placement on both FUSE channels: one real mount per
// combination of
//   engine    uring, sync, null, rbd, each plain and with a delay= model;
//   placement inline, backend-thread, backend-process (--backend process);
//   channel   --fuse-io classic and uring (inline only exists with uring);
// and a short fio --verify=crc32c write and verify through it. Then the
// bytes are read back through the mount and, after the unmount, from the
// image itself (the file, or `rbd export`): the data landed in the image,
// not only in pvdisk. The null engine reads zeros and drops writes, so
// there fio cannot verify: its rows check that writes succeed, reads give
// zeros and the image file is untouched.
//
// The rbd rows need the one-node test cluster (tests/rbd/CMakeLists.txt
// registers them with its fixture; the file rows run without it).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "rbd_harness.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
// The image, and how much of it fio writes and verifies.
constexpr uint64_t kImageBytes = 8 * kMiB;
constexpr uint64_t kWrittenBytes = 4 * kMiB;
constexpr const char* kDelayUs = "200";

struct Combination {
  std::string engine;     // uring, sync, null or rbd
  bool delay = false;     // the disk has delay=kDelayUs
  std::string placement;  // inline, backend-thread or backend-process
  std::string fuse_io;    // classic or uring

  bool rbd() const { return engine == "rbd"; }
};

// How gtest (and ctest's test names) show a combination.
void PrintTo(const Combination& c, std::ostream* os) {
  *os << c.engine << (c.delay ? "+delay" : "") << " " << c.placement << " "
      << c.fuse_io;
}

// Every combination of the engines `engines`, in the order the test runs
// them: one mount shape (placement and channel) after another.
std::vector<Combination> Combinations(const std::vector<std::string>& engines) {
  struct Shape {
    const char* placement;
    const char* fuse_io;
  };
  const Shape shapes[] = {{"inline", "uring"},
                          {"backend-thread", "classic"},
                          {"backend-thread", "uring"},
                          {"backend-process", "classic"},
                          {"backend-process", "uring"}};
  std::vector<Combination> all;
  for (const Shape& shape : shapes) {
    for (const std::string& engine : engines) {
      for (bool delay : {false, true}) {
        all.push_back({engine, delay, shape.placement, shape.fuse_io});
      }
    }
  }
  return all;
}

std::string Capitalized(const std::string& word) {
  std::string out;
  bool up = true;
  for (char c : word) {
    if (c == '-') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(toupper(c)) : c;
    up = false;
  }
  return out;
}

std::string CombinationName(const testing::TestParamInfo<Combination>& info) {
  const Combination& c = info.param;
  return Capitalized(c.engine) + (c.delay ? "Delay" : "") + "_" +
         Capitalized(c.placement) + "_" + Capitalized(c.fuse_io);
}

class EngineMatrixTest : public testing::TestWithParam<Combination> {
 protected:
  const Combination& combination() const { return GetParam(); }

  // The mount's arguments after the mountpoint for `disk` (the --disk
  // argument without delay=).
  std::vector<std::string> MountArgs(const std::string& disk) const {
    const Combination& c = combination();
    std::vector<std::string> args = {
        "--disk", c.delay ? disk + ",delay=" + kDelayUs : disk, "--fuse-io",
        c.fuse_io};
    if (!c.rbd()) {
      args.push_back("--engine");
      args.push_back(c.engine);
    }
    if (c.placement == "backend-process") {
      args.push_back("--backend");
      args.push_back("process");
    } else {
      args.push_back("--placement");
      args.push_back(c.placement);
    }
    return args;
  }

  // Mounts `disk` (served as file `name`), runs the combination's I/O
  // through it and unmounts; returns the first kWrittenBytes as read
  // through the mount, or nullopt if the combination is refused (as
  // expected) or failed.
  std::optional<std::string> Exercise(const std::string& disk,
                                      const std::string& name) {
    const Combination& c = combination();
    TempDir dir;
    const std::string mountpoint = dir.MakeDir("mnt");
    Mount mount(mountpoint, MountArgs(disk));
    if (!mount.ok()) {
      ADD_FAILURE() << mount.mount_result().Describe();
      return std::nullopt;
    }
    DiskStats stats = StatsOf(mount.mountpoint(), name);
    EXPECT_EQ(stats.config["engine"], c.engine);
    EXPECT_EQ(stats.config["placement"], c.placement);
    EXPECT_EQ(stats.config["fuse_io"], c.fuse_io);
    EXPECT_EQ(stats.config["delay_us"], c.delay ? kDelayUs : "none");
    const std::string file = mount.Path(name);
    std::string read_back;
    if (c.engine == "null") {
      // Writes succeed and vanish; reads give zeros.
      Fd fd = Open(file, O_RDWR);
      EXPECT_TRUE(fd.valid()) << std::strerror(errno);
      if (fd.valid()) {
        PwriteAll(fd.get(), 0,
                  std::string_view(PatternBytes(7, kWrittenBytes)));
        EXPECT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);
        read_back = PreadAll(fd.get(), 0, kWrittenBytes);
        EXPECT_EQ(FirstDifference(std::string(kWrittenBytes, '\0'), read_back),
                  "");
      }
    } else {
      CommandResult fio = RunCommand(
          FioCommand(file, {"--rw=randwrite", "--bsrange=4k-64k", "--iodepth=8",
                            "--size=4M", "--verify=crc32c", "--do_verify=1"}),
          std::chrono::seconds(120));
      ExpectFioClean(fio);
      Fd fd = Open(file, O_RDONLY);
      EXPECT_TRUE(fd.valid()) << std::strerror(errno);
      if (fd.valid()) read_back = PreadAll(fd.get(), 0, kWrittenBytes);
    }
    stats = StatsOf(mount.mountpoint(), name);
    EXPECT_GE(stats["sectors_written"], kWrittenBytes / 512);
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);
    CommandResult unmount = mount.Unmount();
    EXPECT_EQ(unmount.exit_code, 0) << unmount.Describe();
    return read_back;
  }
};

// The bytes that pvdisk read back are the image's own: for the null
// engine the image file stays as created (zeros).
void ExpectLanded(const std::string& read_back, const std::string& image) {
  ASSERT_EQ(read_back.size(), kWrittenBytes);
  ASSERT_GE(image.size(), kWrittenBytes);
  EXPECT_EQ(FirstDifference(read_back, image.substr(0, kWrittenBytes)), "");
}

TEST_P(EngineMatrixTest, FioVerifiesAndTheDataLands) {
  const Combination& c = combination();
  if (c.fuse_io == "uring") {
    PVDISK_REQUIRE_FUSE_URING();
  } else {
    PVDISK_REQUIRE_FIO();
  }
  if (c.rbd()) {
    const std::string conf = rbd_testing::SharedClusterConf();
    if (conf.empty()) {
      GTEST_SKIP() << "no test cluster: run through ctest (fixture "
                      "rbd_cluster) or set PVDISK_TEST_CEPH_CONF";
    }
    const std::string name = rbd_testing::UniqueImageName("matrix");
    rbd_testing::CreateRbdImage(conf, name, kImageBytes);
    std::optional<std::string> read_back =
        Exercise("rbd:rbd/" + name + ",conf=" + conf, name);
    if (read_back) {
      std::optional<std::string> exported =
          rbd_testing::ExportRbdImage(conf, name);
      if (exported) ExpectLanded(*read_back, *exported);
    }
    rbd_testing::RemoveRbdImage(conf, name);
    return;
  }
  TempDir images;
  const std::string path = images.Path("disk.img");
  CreateImage(path, kImageBytes);
  std::optional<std::string> read_back = Exercise(path, "disk.img");
  if (read_back) ExpectLanded(*read_back, ReadWholeFile(path));
}

INSTANTIATE_TEST_SUITE_P(Files, EngineMatrixTest,
                         testing::ValuesIn(Combinations({"uring", "sync",
                                                         "null"})),
                         CombinationName);
INSTANTIATE_TEST_SUITE_P(Rbd, EngineMatrixTest,
                         testing::ValuesIn(Combinations({"rbd"})),
                         CombinationName);

}  // namespace
}  // namespace pvdisk::fuse_testing
