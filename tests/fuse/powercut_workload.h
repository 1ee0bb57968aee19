// The workload and the check of the power-cut tests (powercut_test.cc for
// raw images, tests/image/qcow2_powercut_test.cc for qcow2): writer
// threads put numbered 4 KiB blocks (each names its block and the write
// that made it, over its whole length) at random places of a mounted disk
// with cache=volatile, batch after batch, with an fsync after each batch;
// while they write, `pvdisk powercut` cuts the power at a random point.
// The check then reads the disk as the cut left it: every block must hold
// the last write an fsync covered, or one written after it (the unflushed
// writes a cut may keep), whole.
#pragma once

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
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {

inline constexpr uint64_t kCutBlock = 4096;
inline constexpr uint64_t kCutMagic = 0x70766469736b3432ull;

// PVDISK_POWERCUT_CUTS: the number of cuts per case, `fallback` unless it
// is set (`make powercut-check` sets it for a long run).
inline int CutsPerCase(int fallback) {
  const char* value = std::getenv("PVDISK_POWERCUT_CUTS");
  if (value == nullptr) return fallback;
  const int cuts = std::atoi(value);
  return cuts > 0 ? cuts : fallback;
}

// A block's content: the magic, the block's index and the write's id, then
// bytes derived from both, so that a block made of two writes shows.
inline void FillBlock(uint8_t* block, uint64_t index, uint64_t id) {
  uint64_t header[3] = {kCutMagic, index, id};
  std::memcpy(block, header, sizeof(header));
  for (uint64_t i = sizeof(header); i < kCutBlock; ++i) {
    block[i] = static_cast<uint8_t>((id * 131 + index * 7 + i) & 0xff);
  }
}

// The write id a block of the disk holds: 0 for a block never written
// (all zeros), -1 for one that is neither zeros nor one whole write.
inline int64_t IdOf(const uint8_t* block, uint64_t index) {
  bool zeros = true;
  for (uint64_t i = 0; i < kCutBlock && zeros; ++i) zeros = block[i] == 0;
  if (zeros) return 0;
  uint64_t header[3];
  std::memcpy(header, block, sizeof(header));
  if (header[0] != kCutMagic || header[1] != index) return -1;
  std::vector<uint8_t> expected(kCutBlock);
  FillBlock(expected.data(), index, header[2]);
  if (std::memcmp(expected.data(), block, kCutBlock) != 0) return -1;
  return static_cast<int64_t>(header[2]);
}

// What the writers did: per block, the id an fsync covered last (none: the
// block holds `base`, what it held before the mount) and every id written
// since (what a cut may have kept).
struct Ledger {
  std::mutex mu;
  uint64_t base = 0;  // 0: zeros
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

struct CutWorkload {
  std::string disk;             // the disk's file in the mount
  std::string mnt;              // the mountpoint
  uint64_t blocks = 0;          // of kCutBlock bytes
  std::string keep = "random";  // pvdisk powercut --keep
  uint64_t seed = 0;            // the cut point's, and --seed
};

// Writes batches of numbered blocks with an fsync after each through the
// disk of a mount with cache=volatile, cuts its power at a random point
// (or after the last batch), and records what was written in `ledger`.
// Counts in `outcome` the read and the write after the cut that failed
// with EIO (2 when the cut holds).
inline void WriteAndCut(const CutWorkload& work, Ledger& ledger,
                        CutOutcome& outcome) {
  constexpr int kWriters = 4;
  constexpr int kWritesPerWriter = 6;  // per batch
  constexpr int kMaxBatches = 12;
  std::mt19937_64 random(work.seed);
  Fd fd = Open(work.disk, O_RDWR | O_DIRECT);
  EXPECT_TRUE(fd.valid()) << strerror(errno);
  if (!fd.valid()) return;
  const int cut_batch = static_cast<int>(random() % kMaxBatches);
  const int cut_after = static_cast<int>(random() % kWritesPerWriter);
  std::atomic<bool> failed{false};
  std::unique_ptr<std::thread> cutter;
  std::mutex cutter_mu;
  CommandResult cut_result;
  std::vector<std::string> cut_command = {"powercut", work.mnt, "--keep",
                                          work.keep};
  if (work.keep == "random") {
    cut_command.insert(cut_command.end(),
                       {"--seed", std::to_string(work.seed)});
  }
  uint64_t next_id = 1;
  for (int batch = 0; batch <= kMaxBatches && !failed; ++batch) {
    // Distinct blocks per batch: writes of one batch are unordered.
    std::vector<uint64_t> blocks;
    std::set<uint64_t> taken;
    while (blocks.size() < kWriters * kWritesPerWriter) {
      uint64_t b = random() % work.blocks;
      if (taken.insert(b).second) blocks.push_back(b);
    }
    const uint64_t first_id = next_id;
    next_id += blocks.size();
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        void* buffer = nullptr;
        if (posix_memalign(&buffer, kCutBlock, kCutBlock) != 0) return;
        for (int i = 0; i < kWritesPerWriter && !failed; ++i) {
          const size_t k = static_cast<size_t>(w * kWritesPerWriter + i);
          const uint64_t id = first_id + k;
          if (w == 0 && batch == cut_batch && i == cut_after) {
            std::lock_guard<std::mutex> lock(cutter_mu);
            cutter = std::make_unique<std::thread>(
                [&] { cut_result = RunPvdisk(cut_command); });
          }
          {
            std::lock_guard<std::mutex> lock(ledger.mu);
            ledger.unsafe[blocks[k]].insert(id);
          }
          FillBlock(static_cast<uint8_t*>(buffer), blocks[k], id);
          if (pwrite(fd.get(), buffer, kCutBlock,
                     static_cast<off_t>(blocks[k] * kCutBlock)) !=
              static_cast<ssize_t>(kCutBlock)) {
            failed = true;
          }
        }
        free(buffer);
      });
    }
    for (std::thread& writer : writers) writer.join();
    if (failed) break;
    // Before the fsync the writes are held, not in the image: reads must
    // see them all the same, and a block far from each (mostly one never
    // written: zeros, or a backing file's) its newest write or base.
    if (batch < 2) {
      void* aligned = nullptr;
      if (posix_memalign(&aligned, kCutBlock, kCutBlock) != 0) break;
      std::lock_guard<std::mutex> lock(ledger.mu);
      for (size_t k = 0; k < blocks.size(); ++k) {
        const uint64_t far = (blocks[k] + work.blocks / 2) % work.blocks;
        if (pread(fd.get(), aligned, kCutBlock,
                  static_cast<off_t>(blocks[k] * kCutBlock)) !=
            static_cast<ssize_t>(kCutBlock)) {
          break;  // the cut came
        }
        EXPECT_EQ(IdOf(static_cast<uint8_t*>(aligned), blocks[k]),
                  static_cast<int64_t>(first_id + k))
            << "block " << blocks[k] << " does not read back before the "
            << "fsync";
        if (pread(fd.get(), aligned, kCutBlock,
                  static_cast<off_t>(far * kCutBlock)) !=
            static_cast<ssize_t>(kCutBlock)) {
          break;
        }
        const std::set<uint64_t>& unsafe = ledger.unsafe[far];
        const uint64_t newest = !unsafe.empty() ? *unsafe.rbegin()
                                : ledger.durable.count(far)
                                    ? ledger.durable.at(far)
                                    : ledger.base;
        EXPECT_EQ(IdOf(static_cast<uint8_t*>(aligned), far),
                  static_cast<int64_t>(newest))
            << "block " << far << " does not read as its newest write";
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
      cut_result = RunPvdisk(cut_command);
    } else {
      cutter->join();
    }
  }
  EXPECT_EQ(cut_result.exit_code, 0) << cut_result.Describe();
  EXPECT_NE(cut_result.out.find("power cut; dropped"), std::string::npos)
      << cut_result.Describe();
  // After the cut every request fails with EIO.
  void* buffer = nullptr;
  if (posix_memalign(&buffer, kCutBlock, kCutBlock) == 0) {
    if (pread(fd.get(), buffer, kCutBlock, 0) < 0 && errno == EIO) {
      ++outcome.after_cut_errors;
    }
    if (pwrite(fd.get(), buffer, kCutBlock, 0) < 0 && errno == EIO) {
      ++outcome.after_cut_errors;
    }
    free(buffer);
  }
}

// Checks `bytes`, the disk as the cut left it, against `ledger`.
inline void CheckBlocks(const std::string& bytes, uint64_t blocks,
                        Ledger& ledger, CutOutcome& outcome) {
  EXPECT_EQ(bytes.size(), blocks * kCutBlock);
  for (uint64_t b = 0; b < blocks && (b + 1) * kCutBlock <= bytes.size(); ++b) {
    const int64_t id =
        IdOf(reinterpret_cast<const uint8_t*>(bytes.data()) + b * kCutBlock, b);
    const uint64_t durable =
        ledger.durable.count(b) ? ledger.durable.at(b) : ledger.base;
    const std::set<uint64_t>& unsafe = ledger.unsafe[b];
    if (ledger.durable.count(b)) ++outcome.durable_blocks;
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
    } else if (durable != ledger.base &&
               (static_cast<uint64_t>(id) < durable ||
                static_cast<uint64_t>(id) == ledger.base)) {
      ++outcome.lost;
      note("fsynced write lost");
    } else {
      ++outcome.unexpected;
      note("a write never made there");
    }
  }
}

}  // namespace pvdisk::fuse_testing
