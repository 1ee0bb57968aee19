// fio through the mount: verified writes, injected I/O errors, and an
// unmount while fio is writing.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// ---------------------------------------------------------------------------
// fio writes with verification, per engine and block-size pattern.

struct FioJob {
  const char* name;
  std::vector<std::string> args;
  uint64_t bytes;  // how much the job writes
  std::vector<std::string> mount_args = {};
};

const FioJob& JobNamed(const std::string& name) {
  // Random writes cover the whole span, so every 1 MiB stripe of it gets
  // writes: 16 MiB span more stripes than the offset map has queues by
  // default (2), so it still gives every queue writes (the cpu map of the
  // inline placement is not checked per queue). Bs4k's 4096 writes at
  // depth 32 keep the ring as full as more of them would.
  static const std::vector<FioJob> jobs = {
      {"Bs4k",
       {"--rw=randwrite", "--bs=4k", "--iodepth=32", "--size=16M"},
       16 * kMiB},
      {"Bsrange4kTo1m",
       {"--rw=randwrite", "--bsrange=4k-1m", "--iodepth=32", "--size=32M"},
       32 * kMiB},
      // The smallest ring: 32 requests of up to 1 MiB in flight need more
      // data pages than its pool has, so they must wait for each other
      // (ring_full), not hang or fail; 64 MiB give them long enough to.
      {"Bsrange4kTo1mRing32",
       {"--rw=randwrite", "--bsrange=4k-1m", "--iodepth=32", "--size=64M"},
       64 * kMiB,
       {"--ring-size", "32"}},
      // Blocks of 1000 bytes: neighbours share sectors, so concurrent
      // read-modify-write cycles must not lose each other's bytes. fio
      // writes each block once in random order, 32 in flight: a write
      // meets a neighbour in flight with a chance of about 64 / blocks, so
      // a run sees about 64 such pairs whatever its size; 4000 blocks (4
      // stripes, so both default queues) have as many as 8000 had.
      {"Unaligned1000",
       {"--rw=randwrite", "--bs=1000", "--iodepth=32", "--size=4000000"},
       4000000},
  };
  for (const FioJob& job : jobs) {
    if (job.name == name) return job;
  }
  ADD_FAILURE() << "no fio job " << name;
  return jobs[0];
}

// (frontend, engine, job name)
class FioVerifyTest : public ::testing::TestWithParam<
                          std::tuple<std::string, std::string, std::string>> {};

TEST_P(FioVerifyTest, VerifiesAndCountersAreConsistent) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, engine, job_name] = GetParam();
  const FioJob& job = JobNamed(job_name);
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 128 * kMiB);
  std::vector<std::string> mount_args = {"--disk", image,      "--frontend",
                                         frontend, "--engine", engine};
  mount_args.insert(mount_args.end(), job.mount_args.begin(),
                    job.mount_args.end());
  // On the uring channel the FUSE queues bound the requests in flight
  // (2 CPUs x 16 by default): deepen them so that the small ring is what
  // fills up, as on the classic channel.
  if (!job.mount_args.empty() && TestFuseIo() == "uring") {
    mount_args.insert(mount_args.end(),
                      {"--fuse-io", "uring", "--fuse-queue-depth", "64"});
  }
  Mount mount(dir.MakeDir("mnt"), mount_args);
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  std::vector<std::string> args = job.args;
  args.insert(args.end(), {"--verify=crc32c", "--do_verify=1"});
  CommandResult fio = RunCommand(FioCommand(mount.Path("disk0.img"), args),
                                 std::chrono::seconds(180));
  ExpectFioClean(fio);

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["frontend"], frontend);
  EXPECT_EQ(stats.config["engine"], engine);
  EXPECT_GT(stats["fuse_writes"], 0u);
  EXPECT_GT(stats["fuse_reads"], 0u);
  EXPECT_GT(stats["reqs_write"], 0u);
  EXPECT_GT(stats["reqs_read"], 0u);
  EXPECT_GE(stats["sectors_written"], job.bytes / 512);
  EXPECT_GE(stats["sectors_read"], job.bytes / 512);
  EXPECT_GE(stats["segments"], stats["reqs_write"]);
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["invalid_reqs"], 0u);
  EXPECT_GE(stats["inflight_max"], 2u);
  const uint64_t ring_size = job.mount_args.empty() ? 256 : 32;
  EXPECT_EQ(stats.config["ring_size"], std::to_string(ring_size));
  EXPECT_LE(stats["inflight_max"], ring_size) << "more than the ring holds";
  // The small ring's data pool fills (32 requests of up to 1 MiB need more
  // than its 2048 pages), except where nothing waits for it: with zero copy
  // the data stays on the FUSE payloads and the 32 requests fit the 32
  // slots; and the sync engine in the inline placement finishes each
  // request within the round of the queue thread that takes it, and that
  // thread takes requests every few FUSE requests (kEarlySubmitEvery).
  const bool drained_synchronously =
      engine == "sync" && stats.config["placement"] == "inline";
  const bool pool_unused = stats.config["zero_copy"] == "yes";
  if (ring_size == 32 && !drained_synchronously && !pool_unused) {
    EXPECT_GT(stats["ring_full"], 0u);
  }
  EXPECT_GT(stats["kicks_sent"], 0u);
  EXPECT_GT(stats["lat_us_p50"], 0u);
  EXPECT_GE(stats["lat_us_p99"], stats["lat_us_p50"]);
  // The default number of queues, each with its own row; the job's writes
  // span several 1 MiB stripes, so the offset map (backend-thread
  // placement) uses every queue. The cpu map (inline) uses the queue of
  // each CPU fio ran on: one at least.
  const size_t queues = DefaultQueueCount(stats);
  EXPECT_EQ(ConfigNumber(stats, "queues"), queues);
  ASSERT_EQ(stats.queues.size(), queues);
  for (size_t q = 0; q < queues; ++q) {
    if (stats.config["queue_map"] == "offset") {
      EXPECT_GT(stats.queues[q]["reqs_write"], 0u) << "queue " << q;
    }
    EXPECT_LE(stats.queues[q]["inflight_max"], ring_size) << "queue " << q;
  }
  ExpectTotalsAgreeWithQueues(stats);
}

INSTANTIATE_TEST_SUITE_P(
    FrontendsAndEngines, FioVerifyTest,
    ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                       ::testing::Values("uring", "sync"),
                       ::testing::Values("Bs4k", "Bsrange4kTo1m",
                                         "Bsrange4kTo1mRing32",
                                         "Unaligned1000")),
    [](const auto& info) {
      return FrontendTestName(std::get<0>(info.param)) + "_" +
             std::get<1>(info.param) + "_" + std::get<2>(info.param);
    });

// ---------------------------------------------------------------------------
// Injected backend errors become EIO; the rest of the disk keeps working.

class EioTest : public ::testing::TestWithParam<FrontendEngine> {};

TEST_P(EioTest, FaultySectorsFailWithEioAndTheRestWorks) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const uint64_t size = 16 * kMiB;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, size);
  // Sectors 2048..2055 are bytes [1 MiB, 1 MiB + 4 KiB).
  const uint64_t bad = 2048 * 512;
  {
    const auto& [frontend, engine] = GetParam();
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image + ",eio=2048+8", "--frontend", frontend,
                 "--engine", engine});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    std::string buffer(8192, '\0');

    struct Range {
      uint64_t offset;
      uint64_t length;
    };
    for (const Range& r : std::vector<Range>{{bad, 4096},
                                             {bad + 4095, 1},
                                             {bad - 512, 1024},
                                             {bad + 100, 7},
                                             {bad - 4096, 8192}}) {
      errno = 0;
      EXPECT_EQ(pread(fd.get(), buffer.data(), r.length,
                      static_cast<off_t>(r.offset)),
                -1)
          << "read at " << r.offset << " length " << r.length;
      EXPECT_EQ(errno, EIO)
          << "read at " << r.offset << ": " << std::strerror(errno);
    }
    const std::string data = PatternBytes(51, 4096);
    for (const Range& r : std::vector<Range>{
             {bad, 4096}, {bad + 100, 10}, {bad + 4096 - 512, 1024}}) {
      errno = 0;
      EXPECT_EQ(
          pwrite(fd.get(), data.data(), r.length, static_cast<off_t>(r.offset)),
          -1)
          << "write at " << r.offset << " length " << r.length;
      EXPECT_EQ(errno, EIO)
          << "write at " << r.offset << ": " << std::strerror(errno);
    }
    // Right next to the faulty sectors, and elsewhere, I/O works.
    EXPECT_EQ(
        pread(fd.get(), buffer.data(), 4096, static_cast<off_t>(bad - 4096)),
        4096)
        << std::strerror(errno);
    EXPECT_EQ(
        pread(fd.get(), buffer.data(), 4096, static_cast<off_t>(bad + 4096)),
        4096)
        << std::strerror(errno);
    PwriteAll(fd.get(), 2 * kMiB, data);
    PwriteAll(fd.get(), bad + 4096 + 3, data.substr(0, 1000));
    EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), 2 * kMiB, 4096)), "");
    EXPECT_EQ(FirstDifference(data.substr(0, 1000),
                              PreadAll(fd.get(), bad + 4096 + 3, 1000)),
              "");
    // Zeroing the faulty sectors fails too; a flush has no sectors to fail.
    errno = 0;
    EXPECT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        static_cast<off_t>(bad - 4096), 3 * 4096),
              -1);
    EXPECT_EQ(errno, EIO) << std::strerror(errno);
    EXPECT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    // Still failing afterwards.
    errno = 0;
    EXPECT_EQ(pread(fd.get(), buffer.data(), 512, static_cast<off_t>(bad)), -1);
    EXPECT_EQ(errno, EIO);

    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_GT(stats["errors"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);
    EXPECT_NE(stats.config["engine_mode"].find("EIO"), std::string::npos)
        << stats.config["engine_mode"];
    ASSERT_EQ(fd.Close(), 0);

    // The daemon keeps serving.
    CommandResult fio = RunCommand(
        FioCommand(mount.Path("disk0.img"),
                   {"--rw=randwrite", "--bs=4k", "--iodepth=16", "--offset=4M",
                    "--size=8M", "--verify=crc32c", "--do_verify=1"}));
    ExpectFioClean(fio);
    CommandResult unmounted = mount.Unmount();
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  // The refused writes left the faulty sectors as they were.
  Fd fd = Open(image, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(FirstDifference(std::string(4096, '\0'),
                            PreadAll(fd.get(), bad, 4096), bad),
            "");
}

INSTANTIATE_TEST_SUITE_P(FrontendsAndEngines, EioTest,
                         FrontendsTimesEngines({"uring", "sync"}),
                         FrontendEngineName);
// nvme: I/O errors answered as Unrecovered Read Error / Write Fault.
INSTANTIATE_TEST_SUITE_P(Nvme, EioTest,
                         ::testing::Values(FrontendEngine("nvme", "uring")),
                         FrontendEngineName);

// ---------------------------------------------------------------------------
// pvdisk unmount while fio writes (as soon as the stats show writes on the
// ring): it finishes in-flight I/O, so every 4 KiB block holds either the
// old or the new bytes, never a mix. At full speed fio may overwrite the
// whole 64 MiB in a second, so a second run limits its rate, leaving old
// blocks next to new ones for the check.

// (frontend, "FullSpeed" or "RateLimited")
class UnmountDuringIoTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(UnmountDuringIoTest, FinishesInFlightWritesWithoutTornBlocks) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, speed] = GetParam();
  const bool rate_limited = speed == "RateLimited";
  TempDir dir;
  const uint64_t size = 64 * kMiB;
  const std::string image = dir.Path("disk0.img");
  FillFile(image, size, 0xAA);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--frontend", frontend});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const pid_t daemon = mount.daemon_pid();
  ASSERT_GT(daemon, 0);
  EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img").config["frontend"],
            frontend);

  std::vector<std::string> args = {
      "--rw=randwrite", "--bs=64k",     "--iodepth=16",         "--size=64M",
      "--time_based",   "--runtime=30", "--buffer_pattern=0x55"};
  if (rate_limited) args.push_back("--rate=16m");
  BackgroundProcess fio(FioCommand(mount.Path("disk0.img"), args));
  ASSERT_TRUE(fio.started());
  // Unmount once fio's writes are going: some done (so that new blocks
  // reach the image) and some in flight on the ring at this moment.
  DiskStats at_unmount;
  ASSERT_TRUE(WaitUntil(
      [&] {
        at_unmount = StatsOf(mount.mountpoint(), "disk0.img");
        return at_unmount["writes_done"] >= 32 && at_unmount["inflight"] > 0;
      },
      std::chrono::seconds(30)))
      << "fio's writes never were in flight";
  ASSERT_FALSE(fio.Wait(std::chrono::milliseconds(0)))
      << "fio ended before the unmount: " << fio.result().Describe();

  auto start = std::chrono::steady_clock::now();
  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(unmounted.timed_out);
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_LT(took, std::chrono::seconds(30));
  // `pvdisk unmount` returns only once the daemon has exited and the mount
  // is gone.
  EXPECT_FALSE(IsMounted(mount.mountpoint())) << "right after the unmount";
  EXPECT_FALSE(PvdiskProcessAlive(daemon))
      << "daemon " << daemon << " right after the unmount";

  EXPECT_TRUE(fio.Wait(std::chrono::seconds(30)))
      << "fio still runs 30 s after the unmount";
  EXPECT_FALSE(IsMounted(mount.mountpoint()));
  EXPECT_FALSE(PvdiskProcessAlive(daemon)) << "daemon " << daemon;

  std::string in_image = ReadWholeFile(image);
  ASSERT_EQ(in_image.size(), size);
  BlockCensus blocks = CountBlocks(in_image, '\xAA', '\x55');
  EXPECT_EQ(blocks.torn, 0u)
      << "blocks neither all 0xAA nor all 0x55; first: " << blocks.first_torn;
  EXPECT_GT(blocks.new_blocks, 0u) << "fio's writes never reached the image";
  if (rate_limited) {
    EXPECT_GT(blocks.old_blocks, 0u) << "fio rewrote everything despite --rate";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Nvme, FioVerifyTest,
    ::testing::Values(std::make_tuple("nvme", "sync", "Bsrange4kTo1mRing32"),
                      std::make_tuple("nvme", "uring", "Unaligned1000"),
                      std::make_tuple("nvme", "uring", "Bsrange4kTo1m")),
    [](const auto& info) {
      return FrontendTestName(std::get<0>(info.param)) + "_" +
             std::get<1>(info.param) + "_" + std::get<2>(info.param);
    });

INSTANTIATE_TEST_SUITE_P(Frontends, UnmountDuringIoTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values("FullSpeed",
                                                              "RateLimited")),
                         [](const auto& info) {
                           return FrontendTestName(std::get<0>(info.param)) +
                                  "_" + std::get<1>(info.param);
                         });
INSTANTIATE_TEST_SUITE_P(Nvme, UnmountDuringIoTest,
                         ::testing::Values(std::make_tuple("nvme",
                                                           "FullSpeed")),
                         [](const auto& info) {
                           return FrontendTestName(std::get<0>(info.param)) +
                                  "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace pvdisk::fuse_testing
