// Aligned writes, unaligned writes (read-modify-write) and zeroing racing on
// the same sectors through a real mount (issue 11, point 4): afterwards
// every byte must hold the value of a write that may have been the last to
// reach it.
//
// The model. Each operation gets its own byte pattern (zero ranges write
// zeros, which no pattern byte is) and records when its system call began
// and returned. Write j certainly came after write i on a byte both cover
// if j began after i had returned; so the writes of a byte that no other
// write of that byte certainly followed are the candidates for its final
// value, and every byte must equal one of them. The threads meet after
// each round, the region is read back and checked, and what it holds is
// the starting point of the next round, so the model never grows.
//
// A read-modify-write that is not ordered against an aligned write can
// write back the old bytes of a shared sector after the aligned write
// returned: then a byte holds a value from before the aligned write began,
// which the model rejects.
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kSector = 512;
// A small region, so that the threads keep meeting on the same sectors. It
// straddles a 1 MiB stripe boundary (where the write order's slots change).
constexpr uint64_t kRegionStart = kMiB - 8 * kSector;
constexpr uint64_t kRegionSize = 32 * kSector;
constexpr int kThreads = 6;
constexpr int kOpsPerThreadPerRound = 25;
constexpr int kMaxRounds = 60;

enum class Kind { kAligned, kUnaligned, kZero, kPunch };

struct Op {
  Kind kind;
  uint64_t offset;  // absolute, in the disk
  uint64_t length;
  uint32_t id;  // makes the pattern
  int64_t began_ns = 0;
  int64_t returned_ns = 0;
  int error = 0;  // errno of a failed call
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The byte write `id` puts at disk offset `at`: never zero.
uint8_t PatternByte(uint32_t id, uint64_t at) {
  uint64_t x = (uint64_t{id} << 32) ^ at;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint8_t>(1 + x % 255);
}

uint8_t ValueOf(const Op& op, uint64_t at) {
  return op.kind == Kind::kAligned || op.kind == Kind::kUnaligned
             ? PatternByte(op.id, at)
             : 0;
}

// A random operation inside the region: about half aligned writes of 1 to
// 4 sectors, the rest unaligned writes (which always leave at least one
// partial sector) and now and then a zeroed or punched range.
Op RandomOp(std::mt19937_64& rng, uint32_t id) {
  Op op;
  op.id = id;
  int pick = static_cast<int>(rng() % 100);
  if (pick < 45) {
    op.kind = Kind::kAligned;
    uint64_t sectors = 1 + rng() % 4;
    uint64_t first = rng() % (kRegionSize / kSector - sectors + 1);
    op.offset = kRegionStart + first * kSector;
    op.length = sectors * kSector;
    return op;
  }
  op.kind =
      pick < 90 ? Kind::kUnaligned : (pick < 95 ? Kind::kZero : Kind::kPunch);
  do {
    op.length = 1 + rng() % (3 * kSector);
    op.offset = kRegionStart + rng() % (kRegionSize - op.length + 1);
  } while (op.offset % kSector == 0 && op.length % kSector == 0);
  return op;
}

// Runs `op` on `fd`, recording when the call began and returned.
void RunOp(int fd, Op& op) {
  std::string data;
  if (op.kind == Kind::kAligned || op.kind == Kind::kUnaligned) {
    data.resize(op.length);
    for (uint64_t i = 0; i < op.length; ++i) {
      data[i] = static_cast<char>(PatternByte(op.id, op.offset + i));
    }
  }
  op.began_ns = NowNs();
  int result = -1;
  switch (op.kind) {
    case Kind::kAligned:
    case Kind::kUnaligned: {
      ssize_t n = pwrite(fd, data.data(), op.length, op.offset);
      result = n == static_cast<ssize_t>(op.length) ? 0 : -1;
      if (n >= 0 && result < 0) errno = EIO;  // a short write
      break;
    }
    case Kind::kZero:
      result = fallocate(fd, FALLOC_FL_ZERO_RANGE, op.offset, op.length);
      break;
    case Kind::kPunch:
      result = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                         op.offset, op.length);
      break;
  }
  op.returned_ns = NowNs();
  op.error = result == 0 ? 0 : errno;
}

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kAligned:
      return "aligned write";
    case Kind::kUnaligned:
      return "unaligned write";
    case Kind::kZero:
      return "zero range";
    case Kind::kPunch:
      return "punch hole";
  }
  return "?";
}

// Checks `actual` (the region as read back) against the round's `ops` and
// what the region held before the round (`before`). Returns how many bytes
// are wrong and describes the first few in `why`.
uint64_t CheckRound(const std::vector<Op>& ops, const std::string& before,
                    const std::string& actual, std::string* why) {
  uint64_t wrong = 0;
  std::ostringstream out;
  std::vector<const Op*> covering;
  for (uint64_t i = 0; i < kRegionSize; ++i) {
    const uint64_t at = kRegionStart + i;
    covering.clear();
    int64_t last_began = INT64_MIN;
    for (const Op& op : ops) {
      if (at >= op.offset && at < op.offset + op.length) {
        covering.push_back(&op);
        last_began = std::max(last_began, op.began_ns);
      }
    }
    const uint8_t got = static_cast<uint8_t>(actual[i]);
    bool ok;
    if (covering.empty()) {
      ok = got == static_cast<uint8_t>(before[i]);
    } else {
      // A write is a candidate unless another write of this byte began
      // after it had returned.
      ok = std::any_of(covering.begin(), covering.end(), [&](const Op* op) {
        return op->returned_ns >= last_began && ValueOf(*op, at) == got;
      });
    }
    if (ok) continue;
    if (++wrong > 3) continue;
    out << "byte at " << at << " (sector " << at / kSector << ") is "
        << int{got} << "; the writes of it this round:";
    for (const Op* op : covering) {
      out << "\n    " << KindName(op->kind) << " [" << op->offset << ", +"
          << op->length << ") value " << int{ValueOf(*op, at)}
          << (op->returned_ns >= last_began ? " (may be last)" : "")
          << " began " << op->began_ns << " returned " << op->returned_ns;
    }
    if (covering.empty()) {
      out << " none (it held " << int{static_cast<uint8_t>(before[i])} << ")";
    }
    out << "\n";
  }
  *why = out.str();
  return wrong;
}

class WriteOrderTest : public ::testing::TestWithParam<std::string> {};

TEST_P(WriteOrderTest, RacingAlignedUnalignedAndZeroWritesKeepTheLastValue) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 4 * kMiB);
  // Two queues taken in turn and more FUSE threads than cores, so that the
  // parts of one read-modify-write and the writes racing it travel apart.
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image, "--frontend", GetParam(), "--queues", "2",
               "--queue-map", "round-robin", "--fuse-threads", "8"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  Fd check_fd = Open(mount.Path("disk0.img"), O_RDONLY);
  ASSERT_TRUE(check_fd.valid()) << std::strerror(errno);

  std::string before(kRegionSize, '\0');  // a new image reads as zeros
  uint32_t next_id = 1;
  uint64_t total_ops = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int round = 0;
       round < kMaxRounds && std::chrono::steady_clock::now() < deadline;
       ++round) {
    std::vector<std::vector<Op>> per_thread(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      std::mt19937_64 rng(round * 1000 + t);
      for (int k = 0; k < kOpsPerThreadPerRound; ++k) {
        per_thread[t].push_back(RandomOp(rng, next_id++));
      }
    }
    std::vector<std::thread> threads;
    std::atomic<int> open_errors{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
        if (!fd.valid()) {
          open_errors.fetch_add(1);
          return;
        }
        for (Op& op : per_thread[t]) RunOp(fd.get(), op);
      });
    }
    for (std::thread& thread : threads) thread.join();
    ASSERT_EQ(open_errors.load(), 0);

    std::vector<Op> ops;
    for (const auto& list : per_thread) {
      for (const Op& op : list) {
        ASSERT_EQ(op.error, 0)
            << KindName(op.kind) << " [" << op.offset << ", +" << op.length
            << ") failed: " << std::strerror(op.error);
        ops.push_back(op);
      }
    }
    total_ops += ops.size();
    std::string actual = PreadAll(check_fd.get(), kRegionStart, kRegionSize);
    ASSERT_EQ(actual.size(), kRegionSize);
    std::string why;
    uint64_t wrong = CheckRound(ops, before, actual, &why);
    ASSERT_EQ(wrong, 0u) << "round " << round << " (after " << total_ops
                         << " operations): " << wrong
                         << " bytes hold a value no last write of theirs "
                            "wrote:\n"
                         << why;
    before = std::move(actual);
  }
  check_fd.Close();
  CommandResult unmounted = mount.Unmount();
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  // What the mount showed last is what the image holds.
  Fd image_fd = Open(image, O_RDONLY);
  ASSERT_TRUE(image_fd.valid()) << std::strerror(errno);
  EXPECT_EQ(FirstDifference(before,
                            PreadAll(image_fd.get(), kRegionStart, kRegionSize),
                            kRegionStart),
            "");
}

INSTANTIATE_TEST_SUITE_P(Frontends, WriteOrderTest,
                         ::testing::ValuesIn(AllFrontends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pvdisk::fuse_testing
