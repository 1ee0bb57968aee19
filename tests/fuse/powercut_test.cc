// pvdisk's own promise under power cuts (--disk IMG,cache=volatile and
// `pvdisk powercut`): every write an fsync covered before the cut reads
// back after it. Writer threads put numbered 4 KiB blocks (each names its
// block and the write that made it, over its whole length) at random
// places, batch after batch, with an fsync after each batch; while they
// write, `pvdisk powercut --keep random` cuts the power at a random point.
// Then the image is read directly: every block must hold the last write an
// fsync covered, or one written after it (the unflushed writes a cut may
// keep), whole. On every frontend, with merging on, on both placements.
//
// The negative control: with PVDISK_TEST_FAULT=lying-flush a flush
// completes without making anything durable, and the same check must find
// fsynced blocks lost, or it would prove nothing.
//
// PVDISK_POWERCUT_CUTS sets the number of cuts per case (the suite runs a
// one per case; `make powercut-check` runs 200 of the first case).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kBlock = 4096;
constexpr uint64_t kBlocks = 2048;  // an 8 MiB disk
constexpr uint64_t kMagic = 0x70766469736b3432ull;
constexpr int kWriters = 4;
constexpr int kWritesPerWriter = 6;  // per batch
constexpr int kMaxBatches = 12;

int CutsPerCase(int fallback) {
  const char* value = std::getenv("PVDISK_POWERCUT_CUTS");
  if (value == nullptr) return fallback;
  const int cuts = std::atoi(value);
  return cuts > 0 ? cuts : fallback;
}

// A block's content: the magic, the block's index and the write's id, then
// bytes derived from both, so that a block made of two writes shows.
void FillBlock(uint8_t* block, uint64_t index, uint64_t id) {
  uint64_t header[3] = {kMagic, index, id};
  std::memcpy(block, header, sizeof(header));
  for (uint64_t i = sizeof(header); i < kBlock; ++i) {
    block[i] = static_cast<uint8_t>((id * 131 + index * 7 + i) & 0xff);
  }
}

// The write id a block of the image holds: 0 for a block never written
// (all zeros), -1 for one that is neither zeros nor one whole write.
int64_t IdOf(const uint8_t* block, uint64_t index) {
  bool zeros = true;
  for (uint64_t i = 0; i < kBlock && zeros; ++i) zeros = block[i] == 0;
  if (zeros) return 0;
  uint64_t header[3];
  std::memcpy(header, block, sizeof(header));
  if (header[0] != kMagic || header[1] != index) return -1;
  std::vector<uint8_t> expected(kBlock);
  FillBlock(expected.data(), index, header[2]);
  if (std::memcmp(expected.data(), block, kBlock) != 0) return -1;
  return static_cast<int64_t>(header[2]);
}

// What the writers did: per block, the id an fsync covered last (0: none)
// and every id written since (what a cut may have kept).
struct Ledger {
  std::mutex mu;
  std::map<uint64_t, uint64_t> durable;
  std::map<uint64_t, std::set<uint64_t>> unsafe;
};

struct CutOutcome {
  uint64_t durable_blocks = 0;  // blocks an fsync covered
  uint64_t lost = 0;            // of them: older than the fsynced write
  uint64_t torn = 0;            // blocks that are no whole write
  uint64_t unexpected = 0;      // ids never written there
  uint64_t after_cut_errors = 0;
  std::string first_problem;
};

// (frontend, placement)
using Case = std::tuple<std::string, std::string>;

std::vector<std::string> MountArgs(const std::string& image,
                                   const Case& param) {
  const auto& [frontend, placement] = param;
  // The smallest cache: writes start write-outs of their own every few
  // batches, so that flushes and the cut also meet a write-out under way.
  std::vector<std::string> args = {
      "--disk",      image + ",cache=volatile,cache_size=1M",
      "--frontend",  frontend,
      "--placement", placement,
      "--merge",     "on",
      "--queues",    "2"};
  if (placement == "inline") args.insert(args.end(), {"--fuse-io", "uring"});
  return args;
}

// One mount, writes, a cut at a random point, unmount, check.
CutOutcome OneCut(const TempDir& dir, const Case& param, uint64_t seed) {
  CutOutcome outcome;
  const std::string image = dir.Path("cut.img");
  unlink(image.c_str());
  CreateImage(image, kBlocks * kBlock);
  const std::string mnt = dir.Path("mnt");
  std::mt19937_64 random(seed);
  Ledger ledger;
  {
    Mount mount(mnt, MountArgs(image, param));
    EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
    if (!mount.ok()) return outcome;
    Fd fd = Open(mount.Path("cut.img"), O_RDWR | O_DIRECT);
    EXPECT_TRUE(fd.valid()) << strerror(errno);
    if (!fd.valid()) return outcome;
    const int cut_batch = static_cast<int>(random() % kMaxBatches);
    const int cut_after = static_cast<int>(random() % kWritesPerWriter);
    std::atomic<bool> failed{false};
    std::unique_ptr<std::thread> cutter;
    std::mutex cutter_mu;
    CommandResult cut_result;
    uint64_t next_id = 1;
    for (int batch = 0; batch <= kMaxBatches && !failed; ++batch) {
      // Distinct blocks per batch: writes of one batch are unordered.
      std::vector<uint64_t> blocks;
      std::set<uint64_t> taken;
      while (blocks.size() < kWriters * kWritesPerWriter) {
        uint64_t b = random() % kBlocks;
        if (taken.insert(b).second) blocks.push_back(b);
      }
      const uint64_t first_id = next_id;
      next_id += blocks.size();
      std::vector<std::thread> writers;
      for (int w = 0; w < kWriters; ++w) {
        writers.emplace_back([&, w] {
          void* buffer = nullptr;
          if (posix_memalign(&buffer, kBlock, kBlock) != 0) return;
          for (int i = 0; i < kWritesPerWriter && !failed; ++i) {
            const size_t k = static_cast<size_t>(w * kWritesPerWriter + i);
            const uint64_t id = first_id + k;
            if (w == 0 && batch == cut_batch && i == cut_after) {
              std::lock_guard<std::mutex> lock(cutter_mu);
              cutter = std::make_unique<std::thread>([&, seed] {
                cut_result = RunPvdisk({"powercut", mnt, "--keep", "random",
                                        "--seed", std::to_string(seed)});
              });
            }
            {
              std::lock_guard<std::mutex> lock(ledger.mu);
              ledger.unsafe[blocks[k]].insert(id);
            }
            FillBlock(static_cast<uint8_t*>(buffer), blocks[k], id);
            if (pwrite(fd.get(), buffer, kBlock,
                       static_cast<off_t>(blocks[k] * kBlock)) !=
                static_cast<ssize_t>(kBlock)) {
              failed = true;
            }
          }
          free(buffer);
        });
      }
      for (std::thread& writer : writers) writer.join();
      if (failed) break;
      // Before the fsync the writes are held, not in the image: reads must
      // see them all the same.
      if (batch < 2) {
        void* aligned = nullptr;
        if (posix_memalign(&aligned, kBlock, kBlock) != 0) break;
        for (size_t k = 0; k < blocks.size(); ++k) {
          if (pread(fd.get(), aligned, kBlock,
                    static_cast<off_t>(blocks[k] * kBlock)) !=
              static_cast<ssize_t>(kBlock)) {
            break;  // the cut came
          }
          EXPECT_EQ(IdOf(static_cast<uint8_t*>(aligned), blocks[k]),
                    static_cast<int64_t>(first_id + k))
              << "block " << blocks[k] << " does not read back before the "
              << "fsync";
        }
        free(aligned);
      }
      if (fsync(fd.get()) != 0) break;
      // Covered: each block of the batch now holds this batch's write.
      std::lock_guard<std::mutex> lock(ledger.mu);
      for (size_t k = 0; k < blocks.size(); ++k) {
        ledger.durable[blocks[k]] = first_id + k;
        ledger.unsafe[blocks[k]].clear();
      }
    }
    {
      std::lock_guard<std::mutex> lock(cutter_mu);
      if (cutter == nullptr) {
        // The writes ended before the cut point: cut now.
        cut_result = RunPvdisk({"powercut", mnt, "--keep", "random", "--seed",
                                std::to_string(seed)});
      } else {
        cutter->join();
      }
    }
    EXPECT_EQ(cut_result.exit_code, 0) << cut_result.Describe();
    EXPECT_NE(cut_result.out.find("power cut; dropped"), std::string::npos)
        << cut_result.Describe();
    // After the cut every request fails with EIO.
    void* buffer = nullptr;
    if (posix_memalign(&buffer, kBlock, kBlock) == 0) {
      if (pread(fd.get(), buffer, kBlock, 0) < 0 && errno == EIO) {
        ++outcome.after_cut_errors;
      }
      if (pwrite(fd.get(), buffer, kBlock, 0) < 0 && errno == EIO) {
        ++outcome.after_cut_errors;
      }
      free(buffer);
    }
    fd.Close();
    CommandResult unmounted = mount.Unmount();
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  // The reboot's view: the image file as the cut left it.
  Fd raw = Open(image, O_RDONLY);
  EXPECT_TRUE(raw.valid());
  const std::string bytes = PreadAll(raw.get(), 0, kBlocks * kBlock);
  for (uint64_t b = 0; b < kBlocks; ++b) {
    const int64_t id =
        IdOf(reinterpret_cast<const uint8_t*>(bytes.data()) + b * kBlock, b);
    const uint64_t durable = ledger.durable.count(b) ? ledger.durable.at(b) : 0;
    const std::set<uint64_t>& unsafe = ledger.unsafe[b];
    if (durable != 0) ++outcome.durable_blocks;
    auto note = [&](const std::string& what) {
      if (outcome.first_problem.empty()) {
        outcome.first_problem = "block " + std::to_string(b) + ": " + what +
                                " (holds write " + std::to_string(id) +
                                ", fsynced write " + std::to_string(durable) +
                                ")";
      }
    };
    if (id < 0) {
      ++outcome.torn;
      note("torn");
    } else if (static_cast<uint64_t>(id) == durable ||
               unsafe.count(static_cast<uint64_t>(id)) != 0) {
      continue;
    } else if (durable != 0 && static_cast<uint64_t>(id) < durable) {
      ++outcome.lost;
      note("fsynced write lost");
    } else {
      ++outcome.unexpected;
      note("a write never made there");
    }
  }
  return outcome;
}

class PowercutPromiseTest : public ::testing::TestWithParam<Case> {};

TEST_P(PowercutPromiseTest, EveryFsyncedBlockSurvivesRandomCuts) {
  const auto& [frontend, placement] = GetParam();
  if (placement == "inline") {
    PVDISK_REQUIRE_FUSE_URING();
    if (TestFuseIo() == "classic") {
      GTEST_SKIP() << "the inline placement runs on the uring channel";
    }
  } else {
    PVDISK_REQUIRE_FUSE();
  }
  TempDir dir;
  dir.MakeDir("mnt");
  const int cuts = CutsPerCase(1);
  uint64_t durable = 0;
  for (int cut = 0; cut < cuts; ++cut) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(cut);
    CutOutcome outcome = OneCut(dir, GetParam(), seed);
    EXPECT_EQ(outcome.lost, 0u)
        << "seed " << seed << ": " << outcome.first_problem;
    EXPECT_EQ(outcome.torn, 0u)
        << "seed " << seed << ": " << outcome.first_problem;
    EXPECT_EQ(outcome.unexpected, 0u)
        << "seed " << seed << ": " << outcome.first_problem;
    EXPECT_EQ(outcome.after_cut_errors, 2u)
        << "seed " << seed << ": a read and a write after the cut must "
        << "fail with EIO";
    durable += outcome.durable_blocks;
    if (HasFailure()) break;
  }
  std::printf("%d cut(s), %llu fsynced block(s) checked\n", cuts,
              static_cast<unsigned long long>(durable));
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string placement = std::get<1>(info.param);
  for (char& c : placement) {
    if (c == '-') c = '_';
  }
  return FrontendTestName(std::get<0>(info.param)) + "_" + placement;
}

INSTANTIATE_TEST_SUITE_P(
    FrontendsAndPlacements, PowercutPromiseTest,
    ::testing::Combine(::testing::ValuesIn(OfferedFrontends()),
                       ::testing::Values(std::string("backend-thread"),
                                         std::string("inline"))),
    CaseName);
// nvme on backend threads (inline is its default placement elsewhere).
INSTANTIATE_TEST_SUITE_P(Nvme, PowercutPromiseTest,
                         ::testing::Values(Case("nvme", "backend-thread")),
                         CaseName);

TEST(PowercutNegativeControlTest, ALyingFlushLosesFsyncedBlocks) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  dir.MakeDir("mnt");
  ScopedTestFault fault("lying-flush");
  uint64_t lost = 0;
  for (int cut = 0; cut < CutsPerCase(3) && lost == 0; ++cut) {
    CutOutcome outcome = OneCut(dir, Case{"blkif", "backend-thread"},
                                2000 + static_cast<uint64_t>(cut));
    lost += outcome.lost;
  }
  EXPECT_GT(lost, 0u) << "the check found nothing lost although no flush "
                         "made anything durable";
}

// A cut of a disk without the cache, or of one already cut, is refused
// with one line naming the disk, and changes nothing: the disk goes on.
TEST(PowercutBadInputTest, RefusesADiskWithoutTheCacheOrCutAlready) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("plain.img"), 1 << 20);
  CreateImage(dir.Path("cached.img"), 1 << 20);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("plain.img"), "--disk",
                                   dir.Path("cached.img") + ",cache=volatile"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult plain =
      RunPvdisk({"powercut", mount.mountpoint(), "plain.img"});
  ExpectUsageError(plain);
  EXPECT_NE(plain.err.find("plain.img has no volatile cache"),
            std::string::npos)
      << plain.Describe();
  CommandResult which = RunPvdisk({"powercut", mount.mountpoint()});
  ExpectUsageError(which);
  EXPECT_NE(which.err.find("name the one to cut"), std::string::npos)
      << which.Describe();
  EXPECT_EQ(StatsOf(mount.mountpoint(), "plain.img").config["cache"],
            "writethrough");
  EXPECT_EQ(StatsOf(mount.mountpoint(), "cached.img").config["power"], "on");
  CommandResult cut = RunPvdisk({"powercut", mount.mountpoint(), "cached.img"});
  EXPECT_EQ(cut.exit_code, 0) << cut.Describe();
  CommandResult again =
      RunPvdisk({"powercut", mount.mountpoint(), "cached.img"});
  ExpectUsageError(again);
  EXPECT_NE(again.err.find("lost its power already"), std::string::npos)
      << again.Describe();
  // The other disk goes on.
  Fd fd = Open(mount.Path("plain.img"), O_RDWR);
  ASSERT_TRUE(fd.valid());
  PwriteAll(fd.get(), 0, "still here");
  EXPECT_EQ(PreadAll(fd.get(), 0, 10), "still here");
  fd.Close();
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

// A qcow2 image is refused: its metadata is written past the cache.
TEST(PowercutBadInputTest, RefusesAQcow2Image) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CommandResult created = RunPvdisk(
      {"create", dir.Path("q.qcow2"), "--size", "1M", "--format", "qcow2"});
  ASSERT_EQ(created.exit_code, 0) << created.Describe();
  CommandResult mounted = RunPvdisk({"mount", dir.MakeDir("mnt"), "--disk",
                                     dir.Path("q.qcow2") + ",cache=volatile"});
  ExpectUsageError(mounted);
  EXPECT_NE(mounted.err.find("cache=volatile serves raw images"),
            std::string::npos)
      << mounted.Describe();
  EXPECT_FALSE(IsMounted(dir.Path("mnt")));
}

}  // namespace
}  // namespace pvdisk::fuse_testing
