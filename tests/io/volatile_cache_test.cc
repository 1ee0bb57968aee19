// VolatileCache (io/volatile_cache.h) over a real image file: held writes
// stay out of the file until a flush, reads see them (newest data wins,
// overlapping writes split each other), a full cache writes itself out
// while writes go on, flushes cover what completed before them,
// and a power cut leaves the file with none, all, or a seeded subset of
// the held writes, then refuses everything.
#include "io/volatile_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/smaps.h"
#include "gtest/gtest.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kSize = 1 << 20;

class VolatileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/pvdisk_volatile_cache_XXXXXX";
    fd_ = mkstemp(path);
    ASSERT_GE(fd_, 0);
    path_ = path;
    ASSERT_EQ(ftruncate(fd_, kSize), 0);
  }
  void TearDown() override {
    close(fd_);
    unlink(path_.c_str());
  }

  int Write(VolatileCache& cache, uint64_t offset, uint64_t length, char c) {
    std::string data(length, c);
    iovec iov{data.data(), data.size()};
    return cache.Write(offset, &iov, 1, length);
  }
  std::string FileBytes(uint64_t offset, uint64_t length) {
    std::string data(length, '\0');
    EXPECT_EQ(pread(fd_, data.data(), length, static_cast<off_t>(offset)),
              static_cast<ssize_t>(length));
    return data;
  }
  // A read as the engine does it: the file's bytes, then the overlay.
  std::string Read(VolatileCache& cache, uint64_t offset, uint64_t length) {
    VolatileCache::Overlay overlay;
    cache.OverlayFor(offset, length, &overlay);
    std::string data = FileBytes(offset, length);
    iovec iov[2] = {{data.data(), length / 2},
                    {data.data() + length / 2, length - length / 2}};
    VolatileCache::Apply(overlay, offset, iov, 2);
    return data;
  }

  int fd_ = -1;
  std::string path_;
};

TEST_F(VolatileCacheTest, HeldWritesReachTheFileOnlyAtAFlush) {
  VolatileCache cache(fd_, path_, kSize, false);
  ASSERT_EQ(Write(cache, 4096, 8192, 'a'), 0);
  EXPECT_EQ(FileBytes(4096, 8192), std::string(8192, '\0'));
  EXPECT_EQ(Read(cache, 0, 16384), std::string(4096, '\0') +
                                       std::string(8192, 'a') +
                                       std::string(4096, '\0'));
  EXPECT_EQ(cache.counts().unsafe_bytes, 8192u);
  ASSERT_EQ(cache.Flush(), 0);
  EXPECT_EQ(FileBytes(4096, 8192), std::string(8192, 'a'));
  EXPECT_EQ(cache.counts().unsafe_bytes, 0u);
  EXPECT_EQ(cache.counts().unsafe_bytes_max, 8192u);
  EXPECT_EQ(cache.counts().flushes, 1u);
}

TEST_F(VolatileCacheTest, NewerWritesWinAndSplitOlderOnes) {
  VolatileCache cache(fd_, path_, kSize, false);
  ASSERT_EQ(Write(cache, 0, 8192, 'a'), 0);
  ASSERT_EQ(Write(cache, 1024, 512, 'b'), 0);   // inside a
  ASSERT_EQ(Write(cache, 7680, 1024, 'c'), 0);  // over a's end
  ASSERT_EQ(Write(cache, 512, 1024, 'd'), 0);   // over b's start
  const std::string expected = std::string(512, 'a') + std::string(1024, 'd') +
                               std::string(6144, 'a') + std::string(1024, 'c');
  EXPECT_EQ(Read(cache, 0, 8704), expected);
  ASSERT_EQ(cache.Flush(), 0);
  EXPECT_EQ(FileBytes(0, 8704), expected);
}

TEST_F(VolatileCacheTest, AFullCacheWritesItselfOutWhileWritesGoOn) {
  // Half of the limit held starts a write-out; the writes it took are the
  // disk's to destage: a power cut lets it finish.
  VolatileCache cache(fd_, path_, 16384, false);
  ASSERT_EQ(Write(cache, 0, 4096, 'a'), 0);
  ASSERT_EQ(Write(cache, 4096, 4096, 'b'), 0);
  EXPECT_EQ(cache.counts().full_flushes, 0u);
  ASSERT_EQ(Write(cache, 8192, 4096, 'c'), 0);
  EXPECT_EQ(cache.counts().full_flushes, 1u);
  EXPECT_EQ(cache.counts().unsafe_bytes, 4096u);
  EXPECT_EQ(
      Read(cache, 0, 12288),
      std::string(4096, 'a') + std::string(4096, 'b') + std::string(4096, 'c'));
  absl::StatusOr<PowerCutResult> cut = cache.PowerCut(PowerKeep::kNone, 0);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->dropped_writes, 1u);
  EXPECT_EQ(FileBytes(0, 12288), std::string(4096, 'a') +
                                     std::string(4096, 'b') +
                                     std::string(4096, '\0'));
}

TEST_F(VolatileCacheTest, AFlushCoversTheWriteOutUnderWayAndWhatCameAfter) {
  VolatileCache cache(fd_, path_, 16384, false);
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(Write(cache, static_cast<uint64_t>(i) * 4096, 4096,
                    static_cast<char>('a' + i)),
              0);
  }
  EXPECT_GT(cache.counts().full_flushes, 0u);
  EXPECT_LE(cache.counts().unsafe_bytes_max, 8192u);
  ASSERT_EQ(cache.Flush(), 0);
  EXPECT_EQ(cache.counts().unsafe_bytes, 0u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(FileBytes(static_cast<uint64_t>(i) * 4096, 4096),
              std::string(4096, static_cast<char>('a' + i)))
        << i;
  }
}

TEST_F(VolatileCacheTest, FlushesOfManyThreadsEachFindTheirWritesInTheFile) {
  // Each thread writes its own blocks and flushes after each; once a flush
  // returns, the file holds the block it covers, whatever the other
  // threads' write-outs do meanwhile.
  VolatileCache cache(fd_, path_, 64 << 10, false);
  constexpr int kThreads = 4;
  constexpr int kRounds = 32;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const uint64_t offset =
            (static_cast<uint64_t>(r) * kThreads + static_cast<uint64_t>(t)) *
            4096;
        const char c = static_cast<char>('A' + (r + t) % 26);
        if (Write(cache, offset, 4096, c) != 0 || cache.Flush() != 0 ||
            FileBytes(offset, 4096) != std::string(4096, c)) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(VolatileCacheTest, PowerCutKeepNoneDropsEveryUnflushedWrite) {
  VolatileCache cache(fd_, path_, kSize, false);
  ASSERT_EQ(Write(cache, 0, 4096, 'a'), 0);
  ASSERT_EQ(cache.Flush(), 0);
  ASSERT_EQ(Write(cache, 0, 4096, 'b'), 0);
  ASSERT_EQ(Write(cache, 8192, 4096, 'c'), 0);
  absl::StatusOr<PowerCutResult> cut = cache.PowerCut(PowerKeep::kNone, 0);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->dropped_writes, 2u);
  EXPECT_EQ(cut->dropped_bytes, 8192u);
  EXPECT_EQ(cut->kept_writes, 0u);
  EXPECT_EQ(FileBytes(0, 4096), std::string(4096, 'a'));
  EXPECT_EQ(FileBytes(8192, 4096), std::string(4096, '\0'));
  EXPECT_EQ(Write(cache, 0, 4096, 'd'), -EIO);
  EXPECT_EQ(cache.Flush(), -EIO);
  EXPECT_EQ(cache.PowerCut(PowerKeep::kAll, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(VolatileCacheTest, PowerCutKeepAllWritesInCompletionOrder) {
  VolatileCache cache(fd_, path_, kSize, false);
  ASSERT_EQ(Write(cache, 0, 4096, 'a'), 0);
  ASSERT_EQ(Write(cache, 0, 4096, 'b'), 0);
  absl::StatusOr<PowerCutResult> cut = cache.PowerCut(PowerKeep::kAll, 0);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->kept_writes, 2u);
  EXPECT_EQ(FileBytes(0, 4096), std::string(4096, 'b'));
}

TEST_F(VolatileCacheTest, PowerCutKeepRandomIsASeededSubsetOfWholeWrites) {
  std::string first;
  for (int run = 0; run < 2; ++run) {
    ASSERT_EQ(ftruncate(fd_, 0), 0);
    ASSERT_EQ(ftruncate(fd_, kSize), 0);
    VolatileCache cache(fd_, path_, kSize, false);
    for (int i = 0; i < 64; ++i) {
      ASSERT_EQ(Write(cache, static_cast<uint64_t>(i) * 4096, 4096,
                      static_cast<char>('A' + (i % 26))),
                0);
    }
    absl::StatusOr<PowerCutResult> cut = cache.PowerCut(PowerKeep::kRandom, 7);
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_EQ(cut->kept_writes + cut->dropped_writes, 64u);
    EXPECT_GT(cut->kept_writes, 0u);
    EXPECT_GT(cut->dropped_writes, 0u);
    const std::string bytes = FileBytes(0, 64 * 4096);
    uint64_t kept = 0;
    for (int i = 0; i < 64; ++i) {
      const std::string block =
          bytes.substr(static_cast<size_t>(i) * 4096, 4096);
      const bool whole_new =
          block == std::string(4096, static_cast<char>('A' + (i % 26)));
      EXPECT_TRUE(whole_new || block == std::string(4096, '\0')) << i;
      kept += whole_new;
    }
    EXPECT_EQ(kept, cut->kept_writes);
    if (run == 0)
      first = bytes;
    else
      EXPECT_EQ(bytes, first) << "the same seed kept other writes";
  }
}

// Over the image open with O_DIRECT, as a mount has it: random writes of
// whole sectors, overlapping one another, through full write-outs and
// flushes; reads between them and the file at the end match a model.
TEST_F(VolatileCacheTest, WriteOutsOverODirectMatchAModel) {
  const int direct_fd = open(path_.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT);
  ASSERT_GE(direct_fd, 0);
  std::string model(kSize, '\0');
  {
    VolatileCache cache(direct_fd, path_, 256 << 10, false);
    std::mt19937 random(7);
    for (int i = 0; i < 2000; ++i) {
      const uint64_t length = 512 * (1 + random() % 32);
      const uint64_t offset = 512 * (random() % ((kSize - length) / 512));
      const char c = static_cast<char>('a' + random() % 26);
      ASSERT_EQ(Write(cache, offset, length, c), 0);
      model.replace(offset, length, length, c);
      if (i % 97 == 0) {
        ASSERT_EQ(cache.Flush(), 0);
      }
      if (i % 31 == 0) {
        const uint64_t at = 512 * (random() % (kSize / 512 - 64));
        ASSERT_EQ(Read(cache, at, 32768), model.substr(at, 32768)) << i;
      }
    }
    EXPECT_GT(cache.counts().full_flushes, 0u);
    ASSERT_TRUE(cache.WriteOutAll().ok());
  }
  EXPECT_TRUE(FileBytes(0, kSize) == model);
  close(direct_fd);
}

// 1 MiB writes, as a sequential writer makes them, held in the arena's
// huge pages (where the system has them), over the image open with
// O_DIRECT: full write-outs and a flush put them in the file, and a power
// cut with a random keep leaves each later write whole or not at all.
TEST_F(VolatileCacheTest, HugePageBuffersKeepWholeWritesAcrossACut) {
  constexpr uint64_t kMiB = 1 << 20;
  constexpr uint64_t kWrites = 19;
  ASSERT_EQ(ftruncate(fd_, kWrites * kMiB), 0);
  const int direct_fd = open(path_.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT);
  ASSERT_GE(direct_fd, 0);
  VolatileCache cache(direct_fd, path_, 16 * kMiB, false);
  auto fill = [](uint64_t i) { return static_cast<char>('A' + i); };
  // The first 12 go through full write-outs (from 8 MiB held), then a
  // flush; the last 7 stay held.
  for (uint64_t i = 0; i < 12; ++i) {
    ASSERT_EQ(Write(cache, i * kMiB, kMiB, fill(i)), 0);
  }
  EXPECT_GT(cache.counts().full_flushes, 0u);
  ASSERT_EQ(cache.Flush(), 0);
  for (uint64_t i = 12; i < kWrites; ++i) {
    ASSERT_EQ(Write(cache, i * kMiB, kMiB, fill(i)), 0);
  }
  // Held ones come from the arena, and are huge where THP is on.
  VolatileCache::Overlay overlay;
  cache.OverlayFor((kWrites - 1) * kMiB, kMiB, &overlay);
  ASSERT_EQ(overlay.size(), 1u);
  const VolatileCacheMemory memory = cache.memory();
  EXPECT_EQ(memory.outside_takes, 0u);
  EXPECT_GT(memory.used_bytes, 0u);
  EXPECT_LE(memory.touched_bytes, memory.arena_bytes);
  EXPECT_EQ(memory.used_bytes, 7 * kMiB);
  EXPECT_LE(memory.arena_bytes, 2 * 16 * kMiB + 2 * kMiB);
  if (memory.arena_huge) {
    EXPECT_GE(pvdisk::testing::SmapsField(overlay[0].data, "AnonHugePages"),
              2048);
  }
  overlay.clear();
  absl::StatusOr<PowerCutResult> cut = cache.PowerCut(PowerKeep::kRandom, 11);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_GT(cut->kept_writes, 0u);
  EXPECT_GT(cut->dropped_writes, 0u);
  uint64_t kept = 0;
  for (uint64_t i = 0; i < kWrites; ++i) {
    const std::string bytes = FileBytes(i * kMiB, kMiB);
    const bool whole_new = bytes == std::string(kMiB, fill(i));
    if (i < 12) {
      EXPECT_TRUE(whole_new) << "flushed write " << i << " lost";
      continue;
    }
    EXPECT_TRUE(whole_new || bytes == std::string(kMiB, '\0')) << i;
    kept += whole_new;
  }
  EXPECT_EQ(kept, cut->kept_writes);
  EXPECT_EQ(cut->kept_writes + cut->dropped_writes, 7u);
  close(direct_fd);
}

TEST_F(VolatileCacheTest, ALyingFlushLeavesTheWritesAtRisk) {
  VolatileCache cache(fd_, path_, kSize, true);
  ASSERT_EQ(Write(cache, 0, 4096, 'a'), 0);
  ASSERT_EQ(cache.Flush(), 0);
  EXPECT_EQ(cache.counts().unsafe_bytes, 4096u);
  ASSERT_TRUE(cache.PowerCut(PowerKeep::kNone, 0).ok());
  EXPECT_EQ(FileBytes(0, 4096), std::string(4096, '\0'));
}

}  // namespace
}  // namespace pvdisk::io
