// The rbd engine end to end: a real pvdisk mount of an RBD image on a real
// one-node Ceph cluster (scripts/ceph-cluster.sh), driven by fio and by
// direct system calls, with the image read back through librbd (`rbd
// export`), not through pvdisk.
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend_process_util.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "io/rbd_engine.h"
#include "io/rbd_image.h"
#include "rbd_harness.h"

namespace pvdisk::rbd_testing {
namespace {

using namespace ::pvdisk::fuse_testing;  // NOLINT: the mount harness

constexpr uint64_t kMiB = 1 << 20;

#define PVDISK_REQUIRE_CLUSTER()                                     \
  do {                                                               \
    if (SharedClusterConf().empty()) {                               \
      GTEST_SKIP() << "no test cluster: run through ctest (fixture " \
                      "rbd_cluster) or set PVDISK_TEST_CEPH_CONF";   \
    }                                                                \
  } while (0)

// An RBD image in pool "rbd", removed when the test ends.
class TestImage {
 public:
  TestImage(std::string conf, const std::string& prefix, uint64_t size)
      : conf_(std::move(conf)), name_(UniqueImageName(prefix)) {
    CreateRbdImage(conf_, name_, size);
  }
  ~TestImage() { RemoveRbdImage(conf_, name_); }
  const std::string& name() const { return name_; }
  // The --disk argument serving it.
  std::string DiskArg(const std::string& extra = "") const {
    return "rbd:rbd/" + name_ + ",conf=" + conf_ + extra;
  }

 private:
  std::string conf_;
  std::string name_;
};

// Both placements in the daemon: inline (each engine's completion mailbox
// watched on each FUSE queue thread's ring) and backend-thread (an engine
// thread polling it). --backend process: RbdBackendProcessTest and the
// engine matrix.
const std::vector<std::string> kPlacements = {"inline", "backend-thread"};

std::string PlacementTestName(const std::string& placement) {
  return placement == "inline" ? "Inline" : "BackendThread";
}

// (frontend, placement)
class RbdFrontendTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  const std::string& frontend() const { return std::get<0>(GetParam()); }
  const std::string& placement() const { return std::get<1>(GetParam()); }
  std::vector<std::string> MountArgs(const TestImage& image) const {
    return {"--disk",   image.DiskArg(), "--frontend",
            frontend(), "--placement",   placement()};
  }
};

TEST_P(RbdFrontendTest, FioVerifiesThroughAnRbdDisk) {
  PVDISK_REQUIRE_FIO();
  PVDISK_REQUIRE_CLUSTER();
  TestImage image(SharedClusterConf(), "fio", 64 * kMiB);
  TempDir dir;
  Mount mount(dir.MakeDir("mnt"), MountArgs(image));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  // The file is named after the image and sized from it.
  struct stat st;
  ASSERT_EQ(stat(mount.Path(image.name()).c_str(), &st), 0)
      << std::strerror(errno);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 64 * kMiB);

  CommandResult fio = RunCommand(
      FioCommand(mount.Path(image.name()),
                 {"--rw=randwrite", "--bsrange=4k-256k", "--iodepth=16",
                  "--size=32M", "--verify=crc32c", "--do_verify=1"}),
      std::chrono::seconds(180));
  ExpectFioClean(fio);

  DiskStats stats = StatsOf(mount.mountpoint(), image.name());
  EXPECT_EQ(stats.config["engine"], "rbd");
  EXPECT_EQ(stats.config["image"], "rbd:rbd/" + image.name());
  EXPECT_EQ(stats.config["rbd_pool"], "rbd");
  EXPECT_EQ(stats.config["rbd_image"], image.name());
  EXPECT_EQ(stats.config["frontend"], frontend());
  EXPECT_EQ(stats.config["placement"], placement());
  EXPECT_GE(stats["sectors_written"], 32 * kMiB / 512);
  EXPECT_GE(stats["sectors_read"], 32 * kMiB / 512);
  EXPECT_GE(stats["inflight_max"], 2u);
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["invalid_reqs"], 0u);
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

// What a flush, a discard and a write-zeroes leave in the image, as librbd
// (`rbd export`, after the unmount) reads it.
TEST_P(RbdFrontendTest, FlushDiscardAndWriteZeroesReachTheImage) {
  PVDISK_REQUIRE_FUSE();
  PVDISK_REQUIRE_CLUSTER();
  const uint64_t size = 16 * kMiB;
  TestImage image(SharedClusterConf(), "ops", size);
  // RBD objects are 4 MiB: the discard crosses the boundary at 4 MiB, the
  // write-zeroes starts and ends inside one object.
  const uint64_t written = 6 * kMiB;
  const uint64_t discard_at = 4 * kMiB - 64 * 1024, discard_len = 192 * 1024;
  const uint64_t zero_at = 1 * kMiB + 4096, zero_len = 12288;
  std::string expected = PatternBytes(15, written);
  expected.replace(discard_at, discard_len, discard_len, '\0');
  expected.replace(zero_at, zero_len, zero_len, '\0');
  expected.resize(size, '\0');
  {
    TempDir dir;
    Mount mount(dir.MakeDir("mnt"), MountArgs(image));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path(image.name()), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 0, std::string_view(PatternBytes(15, written)));
    ASSERT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        discard_at, discard_len),
              0)
        << std::strerror(errno);
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                        zero_at, zero_len),
              0)
        << std::strerror(errno);
    ASSERT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(expected.substr(0, written),
                              PreadAll(fd.get(), 0, written)),
              "");
    fd.Close();
    DiskStats stats = StatsOf(mount.mountpoint(), image.name());
    EXPECT_GT(stats["reqs_flush"], 0u);
    EXPECT_GT(stats["reqs_discard"], 0u);
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  std::optional<std::string> exported =
      ExportRbdImage(SharedClusterConf(), image.name());
  ASSERT_TRUE(exported.has_value());
  ASSERT_EQ(exported->size(), size);
  EXPECT_EQ(FirstDifference(expected, *exported), "");
}

INSTANTIATE_TEST_SUITE_P(FrontendsAndPlacements, RbdFrontendTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::ValuesIn(kPlacements)),
                         [](const auto& info) {
                           return FrontendTestName(std::get<0>(info.param)) +
                                  PlacementTestName(std::get<1>(info.param));
                         });

// Without --placement an rbd: disk is placed like an image file: inline on
// the uring channel, where it is fastest, backend threads on classic.
TEST(RbdPlacementTest, AutoChoosesInlineOnTheUringChannel) {
  PVDISK_REQUIRE_FUSE();
  PVDISK_REQUIRE_CLUSTER();
  TestImage image(SharedClusterConf(), "auto", 8 * kMiB);
  TempDir dir;
  Mount mount(dir.MakeDir("mnt"), {"--disk", image.DiskArg()});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), image.name());
  EXPECT_EQ(stats.config["placement"],
            stats.config["fuse_io"] == "uring" ? "inline" : "backend-thread");
  Fd fd = Open(mount.Path(image.name()), O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  const std::string data = PatternBytes(3, 1 * kMiB);
  PwriteAll(fd.get(), 0, std::string_view(data));
  EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), 0, data.size())), "");
  fd.Close();
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

// Two backend threads, each with its own engine, on one image: each
// engine's completions reach it through its own mailbox.
TEST(RbdBackendThreadsTest, TwoEnginesShareOneImage) {
  PVDISK_REQUIRE_FIO();
  PVDISK_REQUIRE_CLUSTER();
  TestImage image(SharedClusterConf(), "threads", 32 * kMiB);
  TempDir dir;
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image.DiskArg(), "--queues", "2", "--backend-threads",
               "2", "--queue-map", "round-robin"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult fio =
      RunCommand(FioCommand(mount.Path(image.name()),
                            {"--rw=randwrite", "--bs=4k", "--iodepth=32",
                             "--size=16M", "--verify=crc32c", "--do_verify=1"}),
                 std::chrono::seconds(180));
  ExpectFioClean(fio);
  DiskStats stats = StatsOf(mount.mountpoint(), image.name());
  EXPECT_EQ(stats.config["backend_threads"], "2");
  ASSERT_EQ(stats.queues.size(), 2u);
  for (size_t q = 0; q < 2; ++q) {
    EXPECT_GT(stats.queues[q]["reqs_write"], 0u) << "queue " << q;
    EXPECT_GT(stats.queues[q]["reqs_read"], 0u) << "queue " << q;
  }
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

// The rbd engine alone, two of them on one image, each driven by a thread
// of its own as the queue threads drive theirs: librbd's callbacks hand
// every completion to the engine that submitted it (its tags only, each
// once, the right length), what each wrote reads back, and neither asks
// its caller to spin for a completion (a spin cannot see one come).
TEST(RbdEngineTest, EachEngineGetsItsOwnCompletionsAndNeverAsksToSpin) {
  PVDISK_REQUIRE_CLUSTER();
  TestImage image(SharedClusterConf(), "engines", 8 * kMiB);
  io::RbdSpec spec;
  spec.pool = "rbd";
  spec.image = image.name();
  spec.conf = SharedClusterConf();
  auto opened = io::RbdImage::Open(spec, /*read_only=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status();
  io::RbdImage& rbd = **opened;
  constexpr uint32_t kDepth = 16;
  constexpr uint32_t kBlocks = 64;  // per engine, 4 KiB each
  constexpr uint64_t kBlock = 4096;
  std::string failures[2];
  auto drive = [&](int who) {
    std::string& failed = failures[who];
    io::EngineOptions options;
    options.depth = kDepth;
    auto made = io::CreateRbdEngine(options, rbd);
    if (!made.ok()) {
      failed = std::string(made.status().message());
      return;
    }
    io::IoEngine& engine = **made;
    if (engine.completes_while_spinning()) failed = "asks to spin; ";
    // Engine `who` owns blocks [who * kBlocks, (who + 1) * kBlocks); tags
    // carry `who` in bit 32.
    std::vector<std::vector<uint8_t>> data(kBlocks);
    std::vector<iovec> iov(kBlocks);
    std::vector<int> done(kBlocks, 0);
    for (io::IoOp op : {io::IoOp::kWrite, io::IoOp::kRead}) {
      std::fill(done.begin(), done.end(), 0);
      uint32_t next = 0, finished = 0;
      std::vector<io::IoCompletion> completions;
      while (finished < kBlocks) {
        while (next < kBlocks && engine.inflight() < kDepth) {
          std::vector<uint8_t>& block = data[next];
          block.assign(kBlock, 0);
          if (op == io::IoOp::kWrite) {
            for (uint64_t i = 0; i < kBlock; ++i) {
              block[i] = static_cast<uint8_t>(who * 131 + next * 7 + i);
            }
          }
          iov[next] = {block.data(), kBlock};
          io::IoRequest request;
          request.op = op;
          request.offset =
              (static_cast<uint64_t>(who) * kBlocks + next) * kBlock;
          request.length = kBlock;
          request.iov = &iov[next];
          request.iov_count = 1;
          request.tag = (uint64_t{static_cast<uint32_t>(who)} << 32) | next;
          if (int rc = engine.Queue(request); rc != 0) {
            failed += "queue failed: " + std::to_string(rc) + "; ";
            return;
          }
          ++next;
        }
        completions.clear();
        if (int got = engine.Run(/*wait=*/true, completions); got < 0) {
          failed += "run failed: " + std::to_string(got) + "; ";
          return;
        }
        for (const io::IoCompletion& c : completions) {
          const uint32_t index = static_cast<uint32_t>(c.tag);
          if (c.wake || (c.tag >> 32) != uint64_t(who) || index >= kBlocks ||
              done[index]++ != 0 || c.result != int64_t{kBlock}) {
            failed += "bad completion tag " + std::to_string(c.tag) +
                      " result " + std::to_string(c.result) + "; ";
            return;
          }
          ++finished;
        }
      }
    }
    for (uint32_t b = 0; b < kBlocks; ++b) {
      for (uint64_t i = 0; i < kBlock; ++i) {
        if (data[b][i] != static_cast<uint8_t>(who * 131 + b * 7 + i)) {
          failed += "block " + std::to_string(b) + " reads back wrong; ";
          return;
        }
      }
    }
    if (engine.inflight() != 0) failed += "requests left in flight; ";
  };
  std::thread first(drive, 0), second(drive, 1);
  first.join();
  second.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

// --backend process: the backend process opens the RBD image itself (by
// name, checked by image id) and takes librbd's exclusive lock with its
// first write. fio writes and then verifies every block while the backend
// is killed: its successor takes the lock over (librbd blocklists the dead
// owner) and fio sees no error; afterwards librbd reads back what pvdisk
// reads. The daemon breaks the dead backend's lock itself: a write after
// the kill completes well before the cluster would notice the dead
// client (its watch times out after 30 s).
TEST(RbdBackendProcessTest, FioVerifiesThroughABackendKill) {
  PVDISK_REQUIRE_FIO();
  PVDISK_REQUIRE_CLUSTER();
  const uint64_t size = 16 * kMiB;
  TestImage image(SharedClusterConf(), "process", size);
  std::string read_back;
  {
    TempDir dir;
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image.DiskArg(), "--backend", "process"},
                std::chrono::seconds(150));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    DiskStats before = StatsOf(mount.mountpoint(), image.name());
    EXPECT_EQ(before.config["engine"], "rbd");
    EXPECT_EQ(before.config["placement"], "backend-process");
    // 2048 writes of 4 KiB at 400 per second, then as many verifying reads.
    BackgroundProcess fio(
        FioCommand(mount.Path(image.name()),
                   {"--rw=randwrite", "--bs=4k", "--size=8M", "--iodepth=8",
                    "--rate_iops=400", "--verify=crc32c", "--do_verify=1"}));
    ASSERT_TRUE(fio.started());
    ASSERT_TRUE(WaitUntil(
        [&] {
          return StatsOf(mount.mountpoint(), image.name())["reqs_write"] >= 200;
        },
        std::chrono::seconds(30)));
    const auto killed_at = std::chrono::steady_clock::now();
    EXPECT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), image.name()));
    {
      // Beyond fio's 8 MiB.
      Fd fd = Open(mount.Path(image.name()), O_RDWR);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      PwriteAll(fd.get(), 12 * kMiB, std::string_view(PatternBytes(9, 4096)));
      ASSERT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - killed_at,
              std::chrono::seconds(15));
    ASSERT_TRUE(fio.Wait(std::chrono::seconds(150))) << "fio did not finish";
    ExpectFioClean(fio.result());
    DiskStats stats = StatsOf(mount.mountpoint(), image.name());
    EXPECT_EQ(stats["backend_restarts"], 1u);
    EXPECT_EQ(stats["errors"], 0u);
    Fd fd = Open(mount.Path(image.name()), O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    read_back = PreadAll(fd.get(), 0, size);
    fd.Close();
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  std::optional<std::string> exported =
      ExportRbdImage(SharedClusterConf(), image.name());
  ASSERT_TRUE(exported.has_value());
  EXPECT_EQ(FirstDifference(read_back, *exported), "");
}

// A restarted backend serves the image the mount opened or none: with the
// image renamed away and another one created under its name, the new
// backend finds another image id and refuses it; the disk fails (EIO)
// rather than write to the other image, which stays untouched.
TEST(RbdBackendProcessTest, ARestartedBackendRefusesAnotherImageOfTheName) {
  PVDISK_REQUIRE_FUSE();
  PVDISK_REQUIRE_CLUSTER();
  const std::string conf = SharedClusterConf();
  TestImage image(conf, "renamed", 8 * kMiB);
  const std::string moved = image.name() + "-moved";
  TempDir dir;
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image.DiskArg(), "--backend", "process",
               "--backend-restart-limit", "1"},
              std::chrono::seconds(150));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  Fd fd = Open(mount.Path(image.name()), O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  PwriteAll(fd.get(), 0, std::string_view(PatternBytes(5, 1 * kMiB)));
  ASSERT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);

  CommandResult renamed =
      RunRbd(conf, {"rename", "rbd/" + image.name(), "rbd/" + moved});
  ASSERT_EQ(renamed.exit_code, 0) << renamed.Describe();
  CreateRbdImage(conf, image.name(), 8 * kMiB);
  const pid_t old_pid = BackendPid(mount.mountpoint(), image.name());
  ASSERT_EQ(kill(old_pid, SIGKILL), 0) << std::strerror(errno);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return BackendState(mount.mountpoint(), image.name()) == "failed";
      },
      std::chrono::seconds(60)))
      << BackendState(mount.mountpoint(), image.name());
  errno = 0;
  EXPECT_LT(pwrite(fd.get(), PatternBytes(6, 4096).data(), 4096, 0), 0);
  EXPECT_EQ(errno, EIO);
  fd.Close();
  EXPECT_EQ(mount.Unmount(std::chrono::seconds(90)).exit_code, 0);

  std::optional<std::string> other = ExportRbdImage(conf, image.name());
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(FirstDifference(std::string(8 * kMiB, '\0'), *other), "");
  std::optional<std::string> original = ExportRbdImage(conf, moved);
  ASSERT_TRUE(original.has_value());
  EXPECT_EQ(
      FirstDifference(PatternBytes(5, 1 * kMiB), original->substr(0, 1 * kMiB)),
      "");
  RemoveRbdImage(conf, moved);
}

// Without librbd's exclusive-lock feature nothing would keep a killed
// backend's writes from landing after its successor's: --backend process
// refuses such an image, naming the feature; --backend thread serves it.
TEST(RbdBackendProcessTest, AnImageWithoutExclusiveLockIsRefused) {
  PVDISK_REQUIRE_FUSE();
  PVDISK_REQUIRE_CLUSTER();
  const std::string conf = SharedClusterConf();
  TestImage image(conf, "nolock", 8 * kMiB);
  CommandResult disabled =
      RunRbd(conf, {"feature", "disable", "rbd/" + image.name(), "fast-diff",
                    "object-map", "exclusive-lock"});
  ASSERT_EQ(disabled.exit_code, 0) << disabled.Describe();
  TempDir dir;
  const std::string mountpoint = dir.MakeDir("mnt");
  CommandResult refused = RunPvdisk(
      {"mount", mountpoint, "--disk", image.DiskArg(), "--backend", "process"},
      std::chrono::seconds(60));
  ExpectUsageError(refused);
  EXPECT_NE(refused.err.find("exclusive-lock"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(IsMounted(mountpoint));
  EXPECT_TRUE(PvdiskProcessesMentioning(mountpoint).empty());
  Mount mount(mountpoint, {"--disk", image.DiskArg()});
  EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
}

// A bad rbd: disk is refused with one line, exit 2, and nothing mounted,
// also when the cluster cannot be reached (within the disk's timeout).
TEST(RbdBadSpecTest, EachIsRefusedWithOneLineAndNothingMounted) {
  PVDISK_REQUIRE_FUSE();
  PVDISK_REQUIRE_CLUSTER();
  const std::string conf = SharedClusterConf();
  TempDir dir;
  const std::string mountpoint = dir.MakeDir("mnt");
  // A cluster nobody runs: a monitor address where nothing listens.
  const std::string nowhere = dir.Path("nowhere.conf");
  std::ofstream(nowhere) << "[global]\nmon host = "
                            "[v2:127.0.0.1:9,v1:127.0.0.1:9]\n"
                            "auth client required = none\n";
  struct Case {
    std::string disk;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"rbd:just-an-image", "pool and image"},
      {"rbd:rbd/", "pool and image"},
      {"rbd:rbd/a/b", "pool and image"},
      {"rbd:rbd/img@snap", "snapshots"},
      {"rbd:no-such-pool/img,conf=" + conf, "pool 'no-such-pool' does not"},
      {"rbd:rbd/no-such-image,conf=" + conf, "image 'no-such-image' does not"},
      {"rbd:rbd/img,conf=" + dir.Path("missing.conf"), "does not exist"},
      {"rbd:rbd/img,conf=" + nowhere + ",timeout=2", "cannot reach"},
      {"rbd:rbd/img,lock=off", "exclusive lock"},
      {"rbd:rbd/img,timeout=0", "timeout takes"},
      {"rbd:rbd/img,colour=blue", "unknown option 'colour=blue'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.disk);
    CommandResult mount = RunPvdisk({"mount", mountpoint, "--disk", c.disk},
                                    std::chrono::seconds(60));
    ExpectUsageError(mount);
    EXPECT_NE(mount.err.find(c.says), std::string::npos) << mount.err;
    EXPECT_FALSE(IsMounted(mountpoint));
    EXPECT_TRUE(PvdiskProcessesMentioning(mountpoint).empty());
  }
}

// A cluster of the test's own (the tests below stop or freeze it), an image
// on it mounted with a 3 s timeout in the placement under test, and fio
// writing to it until something fails.
class RbdClusterLossTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Starts all of it and returns once pvdisk has counted `min_writes`
  // writes. Use under ASSERT_NO_FATAL_FAILURE.
  void StartWriting(const std::string& prefix, uint64_t image_bytes,
                    std::vector<std::string> fio_args, uint64_t min_writes) {
    ASSERT_TRUE(cluster_.ok()) << cluster_.start_output();
    name_ = UniqueImageName(prefix);
    CreateRbdImage(cluster_.conf(), name_, image_bytes);
    mount_.emplace(dir_.MakeDir("mnt"),
                   std::vector<std::string>{"--disk",
                                            "rbd:rbd/" + name_ + ",conf=" +
                                                cluster_.conf() + ",timeout=3",
                                            "--placement", GetParam()},
                   std::chrono::seconds(150));
    ASSERT_TRUE(mount_->ok()) << mount_->mount_result().Describe();
    fio_args.push_back("--time_based");
    fio_args.push_back("--runtime=120");  // ended long before by an error
    fio_.emplace(FioCommand(mount_->Path(name_), fio_args));
    ASSERT_TRUE(fio_->started());
    ASSERT_TRUE(WaitUntil(
        [&] {
          return StatsOf(mount_->mountpoint(), name_)["reqs_write"] >=
                 min_writes;
        },
        std::chrono::seconds(30)));
  }

  // fio ended on EIO, pvdisk counted errors, and the unmount finishes.
  void ExpectEioAndACleanUnmount() {
    EXPECT_NE(fio_->result().exit_code, 0);
    EXPECT_NE(fio_->result().Describe().find("Input/output error"),
              std::string::npos)
        << fio_->result().Describe();
    EXPECT_GT(StatsOf(mount_->mountpoint(), name_)["errors"], 0u);
    CommandResult unmount = mount_->Unmount(std::chrono::seconds(90));
    EXPECT_EQ(unmount.exit_code, 0) << unmount.Describe();
    EXPECT_FALSE(IsMounted(mount_->mountpoint()));
  }

  OwnCluster cluster_;
  std::string name_;
  TempDir dir_;
  std::optional<Mount> mount_;
  std::optional<BackgroundProcess> fio_;
};

// The cluster goes away under a writing fio: its I/O fails with EIO (within
// the disk's timeout, not at the end of fio's run), the errors are counted,
// and the unmount still finishes; in both placements.
TEST_P(RbdClusterLossTest, IoFailsWithEioAndTheUnmountFinishes) {
  PVDISK_REQUIRE_FIO();
  ASSERT_NO_FATAL_FAILURE(StartWriting(
      "loss", 64 * kMiB,
      {"--rw=randwrite", "--bs=4k", "--iodepth=8", "--size=32M"}, 100));
  ASSERT_TRUE(cluster_.Stop());

  ASSERT_TRUE(fio_->Wait(std::chrono::seconds(60)))
      << "fio still runs a minute after the cluster stopped";
  ExpectEioAndACleanUnmount();
}

// The OSD hangs (SIGSTOP: its connections stay open, nothing is answered)
// under 1 MiB writes at depth 32, more than the loopback socket buffers
// take: the writes still fail with EIO within the disk's timeout. A write
// must not wait on its data being let go by a connection to a hung OSD.
// librbd's zero-copy writes (rbd_disable_zero_copy_writes=false), which
// hold a write's completion until librbd is done with the caller's memory,
// made this test fail in the inline placement and were refused
// (docs/PERFORMANCE.md, "The device idles under pvdisk").
TEST_P(RbdClusterLossTest, WritesToAFrozenOsdFailWithinTheTimeout) {
  PVDISK_REQUIRE_FIO();
  ASSERT_NO_FATAL_FAILURE(StartWriting(
      "frozen", 256 * kMiB,
      {"--rw=write", "--bs=1m", "--iodepth=32", "--size=256M"}, 64));
  ASSERT_TRUE(cluster_.FreezeOsd(true));
  const auto frozen_at = std::chrono::steady_clock::now();

  const bool ended = fio_->Wait(std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - frozen_at;
  cluster_.FreezeOsd(false);
  ASSERT_TRUE(ended) << "fio still runs a minute after the OSD froze";
  // 3 s of timeout, plus the requests that librbd had not sent yet (each
  // waits its own 3 s) and the machine's noise.
  EXPECT_LT(took, std::chrono::seconds(20));
  ExpectEioAndACleanUnmount();
}

INSTANTIATE_TEST_SUITE_P(Placements, RbdClusterLossTest,
                         ::testing::ValuesIn(kPlacements),
                         [](const auto& info) {
                           return PlacementTestName(info.param);
                         });

// Where a paused-cluster test serves its disk: the mount's flags and fio's
// depth of 1 MiB reads.
struct PauseCase {
  std::string name;
  std::vector<std::string> flags;
  int read_depth;
};

// A cluster of the test's own that stops taking I/O (`ceph osd set pause`:
// librados holds every request, as it holds writes to a full cluster)
// under fio, and takes it again afterwards; an image on it mounted with
// timeout=5 in the placement under test.
class RbdClusterPauseTest : public ::testing::TestWithParam<PauseCase> {
 protected:
  static constexpr int kTimeoutSeconds = 5;
  // The engine's grace past the timeout (1 s) and the machine's noise. A
  // request held behind another one fails a whole timeout later.
  static constexpr auto kSlack = std::chrono::seconds(3);

  void SetUp() override {
    ASSERT_TRUE(cluster_.ok()) << cluster_.start_output();
    name_ = UniqueImageName("pause");
    CreateRbdImage(cluster_.conf(), name_, 512 * kMiB);
    std::vector<std::string> args = {
        "--disk",
        "rbd:rbd/" + name_ + ",conf=" + cluster_.conf() +
            ",timeout=" + std::to_string(kTimeoutSeconds),
        // Room in FUSE's queues beside fio's requests for the stats reads.
        "--fuse-io", "uring", "--fuse-queue-depth", "512"};
    args.insert(args.end(), GetParam().flags.begin(), GetParam().flags.end());
    mount_.emplace(dir_.MakeDir("mnt"), args, std::chrono::seconds(240));
    ASSERT_TRUE(mount_->ok()) << mount_->mount_result().Describe();
  }

  // The disk's stats, after checking that the stats file answers within
  // 2 s (a bounded read: a daemon that hangs must fail the test, not hang
  // it).
  DiskStats Stats() {
    CommandResult read = RunCommand({"cat", mount_->mountpoint() + "/stats"},
                                    std::chrono::seconds(2));
    EXPECT_EQ(read.exit_code, 0)
        << "the stats file did not answer: " << read.Describe();
    return StatsOf(mount_->mountpoint(), name_);
  }

  // Runs fio with `fio_args` until pvdisk has counted `min_requests` of
  // `counter`, pauses the cluster, and expects every request held then to
  // fail with EIO within the timeout (plus kSlack) of the moment the last
  // one went in, the stats file answering all along; then fio to end on
  // EIO, and unpauses. Use under ASSERT_NO_FATAL_FAILURE.
  void ExpectHeldRequestsFail(std::vector<std::string> fio_args,
                              const std::string& counter,
                              uint64_t min_requests) {
    fio_args.insert(fio_args.end(),
                    {"--bs=1m", "--time_based", "--runtime=120"});
    BackgroundProcess fio(FioCommand(mount_->Path(name_), fio_args));
    ASSERT_TRUE(fio.started());
    ASSERT_TRUE(WaitUntil([&] { return Stats()[counter] >= min_requests; },
                          std::chrono::seconds(30)));
    ASSERT_TRUE(cluster_.PauseIo(true));
    // Held: the requests stop going in. `last_change` is when the last
    // one did.
    uint64_t requests = Stats()[counter];
    auto last_change = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - last_change <
           std::chrono::seconds(1)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const uint64_t now = Stats()[counter];
      if (now != requests) {
        requests = now;
        last_change = std::chrono::steady_clock::now();
      }
      ASSERT_LT(std::chrono::steady_clock::now() - last_change,
                std::chrono::seconds(kTimeoutSeconds))
          << counter << " still complete after the pause";
    }
    const DiskStats held = Stats();
    const uint64_t held_inflight = held["inflight"];
    const uint64_t errors_before = held["errors"];
    EXPECT_GE(held_inflight, 8u) << "fio had too little in flight";
    const auto deadline =
        last_change + std::chrono::seconds(kTimeoutSeconds) + kSlack;
    uint64_t errors = errors_before;
    while (errors < errors_before + held_inflight &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      errors = Stats()["errors"];
    }
    EXPECT_GE(errors, errors_before + held_inflight)
        << "of " << held_inflight << " requests held, "
        << errors - errors_before << " failed within " << kTimeoutSeconds
        << " s + " << kSlack.count() << " s";
    // fio stops at its first error; what it queued after the held
    // requests fails a timeout later.
    const bool ended = fio.Wait(std::chrono::seconds(2 * kTimeoutSeconds + 5));
    ASSERT_TRUE(cluster_.PauseIo(false));
    ASSERT_TRUE(ended) << "fio still runs " << 2 * kTimeoutSeconds + 5
                       << " s after its requests failed";
    EXPECT_NE(fio.result().Describe().find("Input/output error"),
              std::string::npos)
        << fio.result().Describe();
  }

  OwnCluster cluster_;
  std::string name_;
  TempDir dir_;
  std::optional<Mount> mount_;
};

// Every read and write the cluster holds fails with EIO within about the
// timeout; meanwhile the stats file answers; once the cluster takes I/O
// again the disk works without a remount, and the unmount is quick.
//
// Reads: more of them in flight (up to 128 MiB) than librados' Objecter
// throttle lets through by default (100 MiB), beyond which librbd's
// threads blocked and the rest failed a timeout later. Writes: to objects
// not written yet, which with the object-map feature wait for the object
// map's updates, sent one after another, a timeout each; the engine
// answers them past the timeout itself.
TEST_P(RbdClusterPauseTest,
       HeldRequestsFailWithinTheTimeoutAndTheDiskRecovers) {
  PVDISK_REQUIRE_FUSE_URING();
  // Data to read back: the first 160 MiB.
  CommandResult fill = RunCommand(
      FioCommand(mount_->Path(name_),
                 {"--rw=write", "--bs=1m", "--iodepth=16", "--size=160M"}),
      std::chrono::seconds(120));
  ExpectFioClean(fill);
  ASSERT_NO_FATAL_FAILURE(ExpectHeldRequestsFail(
      {"--rw=randread", "--size=160M",
       "--iodepth=" + std::to_string(GetParam().read_depth)},
      "reqs_read", 64));
  ASSERT_NO_FATAL_FAILURE(ExpectHeldRequestsFail(
      {"--rw=write", "--offset=192M", "--size=256M", "--iodepth=16"},
      "reqs_write", 16 + 160));

  {
    // A real disk recovers from an outage: no remount needed. O_DIRECT
    // (aligned buffers): the read comes from the cluster, not a cache.
    Fd fd = Open(mount_->Path(name_), O_RDWR | O_DIRECT);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    const std::string data = PatternBytes(21, 1 * kMiB);
    void* out = nullptr;
    void* in = nullptr;
    ASSERT_EQ(posix_memalign(&out, 4096, data.size()), 0);
    ASSERT_EQ(posix_memalign(&in, 4096, data.size()), 0);
    std::unique_ptr<void, decltype(&free)> free_out(out, &free);
    std::unique_ptr<void, decltype(&free)> free_in(in, &free);
    std::memcpy(out, data.data(), data.size());
    ASSERT_EQ(pwrite(fd.get(), out, data.size(), 500 * kMiB),
              static_cast<ssize_t>(data.size()))
        << std::strerror(errno);
    ASSERT_EQ(fdatasync(fd.get()), 0) << std::strerror(errno);
    ASSERT_EQ(pread(fd.get(), in, data.size(), 500 * kMiB),
              static_cast<ssize_t>(data.size()))
        << std::strerror(errno);
    EXPECT_EQ(
        FirstDifference(data, std::string(static_cast<char*>(in), data.size())),
        "");
  }
  const auto unmount_at = std::chrono::steady_clock::now();
  CommandResult unmount = mount_->Unmount(std::chrono::seconds(60));
  EXPECT_EQ(unmount.exit_code, 0) << unmount.Describe();
  EXPECT_LT(std::chrono::steady_clock::now() - unmount_at,
            std::chrono::seconds(kTimeoutSeconds));
  RemoveRbdImage(cluster_.conf(), name_);
}

// In the daemon the FUSE payloads are lent to the engine: fio's 128 reads
// of 1 MiB are in librbd's hands at once. A backend process gets its data
// through the queue's page pool (8 MiB a queue): at most 16 such requests
// reach it at once (the Objecter's throttle is out of reach), and those
// behind them wait for the pool, each batch failing a timeout after the
// one before; so fio reads at depth 16 there.
INSTANTIATE_TEST_SUITE_P(
    Placements, RbdClusterPauseTest,
    ::testing::Values(
        PauseCase{"Inline", {"--placement", "inline"}, 128},
        PauseCase{"BackendThread", {"--placement", "backend-thread"}, 128},
        PauseCase{"BackendProcess", {"--backend", "process"}, 16}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pvdisk::rbd_testing
