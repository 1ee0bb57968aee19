// Aligned writes, unaligned writes (read-modify-write) and zeroing racing on
// the same sectors through a real mount (a read-modify-write must not undo
// a write that overlapped it): afterwards every byte must hold the value of a
// write that may have been the last to reach it.
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
// which the model rejects. On main before the write order existed this
// failed in every run tried (7 of 7, within the first two rounds).
//
// The writes go through Linux AIO on an O_DIRECT descriptor, several in
// flight per thread: synchronous pwrite calls to one FUSE file are
// serialised by the kernel's inode lock and would never race.
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sched.h>
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
#include "linux_aio.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kSector = 512;
// A small region, so that the threads keep meeting on the same sectors. It
// straddles a 1 MiB stripe boundary (where the write order's slots change).
constexpr uint64_t kRegionStart = kMiB - 8 * kSector;
constexpr uint64_t kRegionSize = 32 * kSector;
constexpr int kThreads = 4;
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

std::string DataOf(const Op& op) {
  std::string data(op.length, '\0');
  for (uint64_t i = 0; i < op.length; ++i) {
    data[i] = static_cast<char>(PatternByte(op.id, op.offset + i));
  }
  return data;
}

// Runs `ops` in order on `fd` (opened O_DIRECT, so FUSE keeps several
// asynchronous writes of one file in flight; synchronous pwrite calls to
// one file are serialised by the kernel's inode lock), up to kDepth writes
// at a time; zero and punch ranges are synchronous fallocate calls in
// between. Records when each was submitted and when its completion was
// seen. Returns false (with errno) if the AIO machinery itself fails.
bool RunOps(int fd, std::vector<Op>& ops) {
  constexpr unsigned kDepth = 8;
  aio_context_t context = 0;
  if (IoSetup(kDepth, &context) != 0) return false;
  std::vector<std::string> data(ops.size());
  std::vector<iocb> iocbs(ops.size());
  size_t next = 0;
  unsigned in_flight = 0;
  bool ok = true;
  while (ok && (next < ops.size() || in_flight > 0)) {
    while (next < ops.size() && in_flight < kDepth) {
      Op& op = ops[next];
      if (op.kind == Kind::kZero || op.kind == Kind::kPunch) {
        int mode = op.kind == Kind::kZero
                       ? FALLOC_FL_ZERO_RANGE
                       : FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
        op.began_ns = NowNs();
        int result = fallocate(fd, mode, op.offset, op.length);
        op.returned_ns = NowNs();
        op.error = result == 0 ? 0 : errno;
        ++next;
        continue;
      }
      data[next] = DataOf(op);
      iocb& cb = iocbs[next];
      std::memset(&cb, 0, sizeof(cb));
      cb.aio_data = next;
      cb.aio_lio_opcode = IOCB_CMD_PWRITE;
      cb.aio_fildes = static_cast<uint32_t>(fd);
      cb.aio_buf = reinterpret_cast<uint64_t>(data[next].data());
      cb.aio_nbytes = op.length;
      cb.aio_offset = static_cast<int64_t>(op.offset);
      op.began_ns = NowNs();
      if (IoSubmit(context, &cb) != 1) {
        ok = false;
        break;
      }
      ++in_flight;
      ++next;
    }
    if (in_flight == 0) continue;
    io_event events[kDepth];
    int got = IoGetEvents(context, kDepth, events);
    if (got <= 0) {
      ok = false;
      break;
    }
    int64_t now = NowNs();
    for (int e = 0; e < got; ++e) {
      Op& op = ops[events[e].data];
      op.returned_ns = now;
      int64_t result = events[e].res;
      op.error = result == static_cast<int64_t>(op.length)
                     ? 0
                     : (result < 0 ? static_cast<int>(-result) : EIO);
      --in_flight;
    }
  }
  int saved = errno;
  IoDestroy(context);  // waits for what is still in flight
  errno = saved;
  return ok;
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
  std::vector<std::string> args = {"--disk", image, "--frontend", GetParam()};
  const bool classic = TestFuseIo() == "classic";
  if (classic) {
    // Two queues taken in turn and more FUSE threads than cores, so that
    // the parts of one read-modify-write and the writes racing it travel
    // apart.
    args.insert(args.end(), {"--queues", "2", "--queue-map", "round-robin",
                             "--fuse-threads", "8"});
  }
  // On the uring channel, its default setup and nothing else (inline
  // placement: one queue per CPU, driven by the FUSE queue thread of that
  // CPU); the writer threads run on different CPUs, so their requests
  // arrive on different queues.
  Mount mount(dir.MakeDir("mnt"), args);
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  {
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats.config["fuse_io"], classic ? "classic" : "uring");
    EXPECT_EQ(stats.config["placement"], DefaultPlacement(stats));
    if (!classic) {
      EXPECT_EQ(ConfigNumber(stats, "queues"), DefaultQueueCount(stats));
    }
  }
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
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
    std::vector<int> thread_errors(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        cpu_set_t cpu;
        CPU_ZERO(&cpu);
        CPU_SET(static_cast<int>(t % cpus), &cpu);
        pthread_setaffinity_np(pthread_self(), sizeof(cpu), &cpu);
        Fd fd = Open(mount.Path("disk0.img"), O_RDWR | O_DIRECT);
        if (!fd.valid() || !RunOps(fd.get(), per_thread[t])) {
          thread_errors[t] = errno;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int error : thread_errors) {
      ASSERT_EQ(error, 0) << "open or AIO failed: " << std::strerror(error);
    }

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
  if (cpus > 1) {
    // The race crossed queues: more than one queue carried writes.
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    int queues_with_writes = 0;
    for (const auto& queue : stats.queues) {
      if (queue.at("reqs_write") > 0) ++queues_with_writes;
    }
    EXPECT_GE(queues_with_writes, 2);
  }
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
                         [](const auto& info) {
                           return FrontendTestName(info.param);
                         });
INSTANTIATE_TEST_SUITE_P(Nvme, WriteOrderTest, ::testing::Values("nvme"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pvdisk::fuse_testing
