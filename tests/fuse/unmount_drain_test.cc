// Unmount while overlapping unaligned writes are queued behind one another on
// different queues (a write waiting behind another is in no queue yet, so
// unmount must wait for it too): every run must unmount in bounded time, answer
// every write issued (done or failed), and leave an image in which every block
// holds its last write that succeeded (or the one the unmount failed): no
// update lost, none torn.
#include <fcntl.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "linux_aio.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
// 100-byte blocks at multiples of 100 inside 4 KiB: every write is a
// read-modify-write, and neighbours share sectors.
constexpr uint64_t kBlockSize = 100;
constexpr uint64_t kBlocks = 4096 / kBlockSize;  // 40
constexpr int kWriters = 2;  // writer w owns the blocks b with b % 2 == w
constexpr int kRuns = 5;

// Two ways for a write and the one waiting behind it to be on different
// queues at unmount.
struct DrainCase {
  const char* name;
  std::vector<std::string> mount_flags;
  uint64_t offset;  // where the 4 KiB start
};
const DrainCase kCases[] = {
    // Every request to the next queue: a write and the one waiting behind
    // it land on different queues. An unmount that waits for the queues
    // alone hangs in about 2 of 3 runs of this case, so five runs miss it
    // about once in 250.
    {"RoundRobin", {"--queues", "2", "--queue-map", "round-robin"}, 0},
    // Default flags (with backend threads, 1 MiB stripes per queue), 4 KiB
    // straddling a stripe boundary: an unmount that waits for the queues
    // alone hangs in about 1 of 4 runs of this case.
    {"StraddlingAStripe", {}, kMiB - 2 * 1024},
};

void PrintTo(const DrainCase& drain_case, std::ostream* out) {
  *out << drain_case.name;
}

// Write `seq` (1, 2, ...) of block `block`: its number and sequence number,
// then bytes made from both. Sequence 0 is the image's zeros.
std::string BlockContents(uint64_t block, uint32_t seq) {
  if (seq == 0) return std::string(kBlockSize, '\0');
  std::string bytes = PatternBytes((block << 32) | seq, kBlockSize);
  const uint32_t head[2] = {static_cast<uint32_t>(block), seq};
  std::memcpy(bytes.data(), head, sizeof(head));
  return bytes;
}

// What one block saw: the last write answered with success, and the write
// answered with an error (it may or may not have reached the image), if any.
struct BlockLog {
  uint32_t last_done = 0;
  uint32_t failed = 0;
};

// Rewrites each of its blocks over and over, one write per block in flight
// (Linux AIO on an O_DIRECT descriptor), the next sequence number as soon as
// the last one is answered, until a write fails (the mount went away) or
// `stop`. Fills `logs` (indexed by block) for its own blocks.
void RewriteBlocks(const std::string& path, uint64_t start, int writer,
                   const std::atomic<bool>& stop, std::vector<BlockLog>& logs,
                   int* setup_error) {
  Fd fd = Open(path, O_WRONLY | O_DIRECT);
  aio_context_t context = 0;
  if (!fd.valid() || IoSetup(kBlocks, &context) != 0) {
    *setup_error = errno;
    return;
  }
  std::vector<std::string> data(kBlocks);
  std::vector<iocb> iocbs(kBlocks);
  std::vector<uint32_t> in_flight_seq(kBlocks, 0);
  auto submit = [&](uint64_t block) {
    const uint32_t seq = logs[block].last_done + 1;
    data[block] = BlockContents(block, seq);
    iocb& cb = iocbs[block];
    std::memset(&cb, 0, sizeof(cb));
    cb.aio_data = block;
    cb.aio_lio_opcode = IOCB_CMD_PWRITE;
    cb.aio_fildes = static_cast<uint32_t>(fd.get());
    cb.aio_buf = reinterpret_cast<uint64_t>(data[block].data());
    cb.aio_nbytes = kBlockSize;
    cb.aio_offset = static_cast<int64_t>(start + block * kBlockSize);
    if (IoSubmit(context, &cb) != 1) {
      logs[block].failed = seq;  // never sent
      return false;
    }
    in_flight_seq[block] = seq;
    return true;
  };
  unsigned in_flight = 0;
  bool failing = false;
  for (uint64_t block = writer; block < kBlocks; block += kWriters) {
    if (submit(block)) ++in_flight;
  }
  while (in_flight > 0) {
    io_event events[kBlocks];
    int got = IoGetEvents(context, kBlocks, events);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    for (int e = 0; e < got; ++e) {
      const uint64_t block = events[e].data;
      --in_flight;
      if (events[e].res == static_cast<int64_t>(kBlockSize)) {
        logs[block].last_done = in_flight_seq[block];
      } else {
        logs[block].failed = in_flight_seq[block];
        failing = true;
      }
      if (!failing && !stop && submit(block)) ++in_flight;
    }
  }
  IoDestroy(context);
}

class UnmountDrainTest : public ::testing::TestWithParam<DrainCase> {};

TEST_P(UnmountDrainTest,
       UnmountFinishesWithUnalignedWritesQueuedBehindEachOther) {
  PVDISK_REQUIRE_FUSE();
  const DrainCase& drain_case = GetParam();
  const uint64_t start = drain_case.offset;
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run + 1) + " of " +
                 std::to_string(kRuns));
    TempDir dir;
    const std::string image = dir.Path("disk0.img");
    const uint64_t size = 8 * kMiB;
    CreateImage(image, size);
    std::vector<std::string> args = {"--disk", image};
    args.insert(args.end(), drain_case.mount_flags.begin(),
                drain_case.mount_flags.end());
    Mount mount(dir.MakeDir("mnt"), args);
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    if (drain_case.mount_flags.empty()) {
      DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
      EXPECT_EQ(stats.config["placement"], DefaultPlacement(stats));
      EXPECT_EQ(ConfigNumber(stats, "queues"), DefaultQueueCount(stats));
    } else {
      EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img").config["queue_map"],
                "round-robin");
    }

    std::vector<BlockLog> logs(kBlocks);
    std::atomic<bool> stop{false};
    int setup_errors[kWriters] = {0, 0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        RewriteBlocks(mount.Path("disk0.img"), start, w, stop, logs,
                      &setup_errors[w]);
      });
    }
    // Unmount once the writes have piled up behind each other: many done,
    // and many in the daemon at once.
    uint64_t in_daemon = 0;
    const bool piled_up = WaitUntil(
        [&] {
          DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
          in_daemon = stats["fuse_writes"] - stats["writes_done"];
          return stats["writes_done"] > 2000 && in_daemon >= 8;
        },
        std::chrono::seconds(60));
    if (!piled_up) stop = true;
    ASSERT_TRUE(piled_up) << "the writes did not pile up (last seen "
                          << in_daemon << " in the daemon)";

    CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
    if (unmounted.timed_out) {
      // The daemon hangs: kill it so that the clean-up is quick, and stop.
      kill(mount.daemon_pid(), SIGKILL);
      stop = true;
      for (std::thread& writer : writers) writer.join();
      FAIL() << "pvdisk unmount did not finish within 30 s with writes in "
                "flight: "
             << unmounted.Describe();
    }
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
    // Every write issued was answered: the writers end (with errors for
    // the writes the kernel still had queued when the mount went away).
    stop = true;
    for (std::thread& writer : writers) writer.join();
    for (int error : setup_errors) {
      ASSERT_EQ(error, 0) << "open or io_setup: " << std::strerror(error);
    }
    EXPECT_TRUE(
        WaitUntil([&] { return !PvdiskProcessAlive(mount.daemon_pid()); },
                  std::chrono::seconds(10)))
        << "the daemon still runs after pvdisk unmount returned";

    // Every block holds its last write that succeeded, or the one that
    // failed at the unmount; an older one is a lost update, a mix a torn
    // read-modify-write. Nothing outside the 4 KiB was touched.
    Fd fd = Open(image, O_RDONLY);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    const std::string contents = PreadAll(fd.get(), 0, size);
    uint64_t writes_done = 0;
    for (uint64_t block = 0; block < kBlocks; ++block) {
      const BlockLog& log = logs[block];
      writes_done += log.last_done;
      std::string_view got(contents.data() + start + block * kBlockSize,
                           kBlockSize);
      if (got == BlockContents(block, log.last_done)) continue;
      if (log.failed != 0 && got == BlockContents(block, log.failed)) continue;
      uint32_t head[2];
      std::memcpy(head, got.data(), sizeof(head));
      ADD_FAILURE() << "block " << block << " (at "
                    << start + block * kBlockSize << ") does not hold write "
                    << log.last_done << " (its last that succeeded) or "
                    << log.failed
                    << " (failed at the unmount); its header says block "
                    << head[0] << " write " << head[1] << ", and "
                    << (got == BlockContents(head[0], head[1])
                            ? "the rest matches it (a lost update)"
                            : "the rest does not (torn)");
    }
    EXPECT_GT(writes_done, 2000u);
    std::string outside = contents;
    outside.replace(start, kBlocks * kBlockSize, kBlocks * kBlockSize, '\0');
    EXPECT_EQ(FirstDifference(std::string(size, '\0'), outside), "")
        << "bytes outside the written 4 KiB";
  }
}

INSTANTIATE_TEST_SUITE_P(IssueReproductions, UnmountDrainTest,
                         ::testing::ValuesIn(kCases), [](const auto& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
