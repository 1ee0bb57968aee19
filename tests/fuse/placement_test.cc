// --placement: the inline placement (each FUSE uring queue's thread drives
// its queue of every disk, front and back) carries verified I/O from every
// CPU, on several disks, with kicks from other threads (plug timers) and
// read-modify-writes released across queues; auto falls back to backend
// threads when a queue flag asks for them; combinations that make no sense
// are refused with one line naming the flag, and nothing is mounted.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
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

// fio jobs split over the CPUs this test may use, each on its own part of
// the file: requests then arrive on several FUSE queues.
std::vector<std::string> SplitJobs(int jobs, const std::string& part) {
  return {"--numjobs=" + std::to_string(jobs), "--offset_increment=" + part,
          "--size=" + part, "--cpus_allowed=0-" + std::to_string(jobs - 1),
          "--cpus_allowed_policy=split"};
}

int OnlineCpus() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : static_cast<int>(n);
}

TEST(PlacementTest, InlineServesTwoDisksFromEveryCpuAndVerifies) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  CreateImage(dir.Path("a.img"), 64 * kMiB);
  CreateImage(dir.Path("b.img"), 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("a.img"), "--disk", dir.Path("b.img"),
               "--fuse-io", "uring", "--placement", "inline"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const int jobs = std::min(OnlineCpus(), 4);
  for (const char* name : {"a.img", "b.img"}) {
    std::vector<std::string> args = {"--rw=randrw", "--bsrange=4k-256k",
                                     "--iodepth=16", "--verify=crc32c"};
    std::vector<std::string> split = SplitJobs(jobs, "16M");
    args.insert(args.end(), split.begin(), split.end());
    ExpectFioClean(RunCommand(FioCommand(mount.Path(name), args),
                              std::chrono::seconds(180)));
  }
  for (const char* name : {"a.img", "b.img"}) {
    DiskStats stats = StatsOf(mount.mountpoint(), name);
    EXPECT_EQ(stats.config["placement"], "inline") << name;
    EXPECT_EQ(stats.config["queue_map"], "cpu") << name;
    EXPECT_EQ(ConfigNumber(stats, "queues"), PossibleCpuCount()) << name;
    EXPECT_EQ(stats.config["fixed_buffers"], "yes") << name;
    EXPECT_EQ(stats["errors"], 0u) << name;
    EXPECT_EQ(stats["invalid_reqs"], 0u) << name;
    EXPECT_EQ(stats["inflight"], 0u) << name;
    // A kick to the same thread is a function call, still counted.
    EXPECT_GT(stats["kicks_sent"], 0u) << name;
    EXPECT_GT(stats["irqs_sent"], 0u) << name;
    // Each CPU fio ran on sent its requests to its own queue.
    for (int cpu = 0; cpu < jobs; ++cpu) {
      EXPECT_GT(stats.queues[cpu]["reqs_write"], 0u)
          << name << " queue " << cpu;
    }
    ExpectTotalsAgreeWithQueues(stats);
  }
}

// Plugged requests are flushed by the queue's completion thread when their
// plug expires: its kick comes from another thread, through the kick
// eventfd that the FUSE queue's ring watches.
TEST(PlacementTest, InlineTakesKicksFromOtherThreads) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 32 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("disk0.img"), "--fuse-io", "uring",
               "--placement", "inline", "--plug-us", "2000"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  ExpectFioClean(
      RunCommand(FioCommand(mount.Path("disk0.img"),
                            {"--rw=randwrite", "--bs=4k", "--iodepth=1",
                             "--size=1M", "--verify=crc32c"}),
                 std::chrono::seconds(120)));
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["placement"], "inline");
  EXPECT_GT(stats["plugs"], 0u);
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
}

// --poll-us inline: at iodepth 1 the queue thread spins for its lone
// image read's completion instead of sleeping, and the spins find it
// (polls_hit); the data still verifies. With --poll-us 0 it never spins.
TEST(PlacementTest, InlineSpinsForTheLoneCompletion) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 32 * kMiB);
  for (const char* poll_us : {"200", "0"}) {
    Mount mount(dir.MakeDir(std::string("mnt") + poll_us),
                {"--disk", dir.Path("disk0.img"), "--fuse-io", "uring",
                 "--placement", "inline", "--poll-us", poll_us});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    ExpectFioClean(
        RunCommand(FioCommand(mount.Path("disk0.img"),
                              {"--rw=randwrite", "--bs=4k", "--iodepth=1",
                               "--size=4M", "--verify=crc32c"}),
                   std::chrono::seconds(120)));
    ResetStats(mount.mountpoint());
    ExpectFioClean(
        RunCommand(FioCommand(mount.Path("disk0.img"),
                              {"--rw=randread", "--bs=4k", "--iodepth=1",
                               "--size=32M", "--io_size=4M"}),
                   std::chrono::seconds(120)));
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats.config["placement"], "inline");
    EXPECT_EQ(stats.config["poll_us"], poll_us);
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);
    const uint64_t reads = stats["reqs_read"];
    EXPECT_EQ(reads, 1024u);  // 4 MiB of 4 KiB reads, none merged at depth 1
    if (std::string(poll_us) == "0") {
      EXPECT_EQ(stats["polls_hit"], 0u);
    } else {
      // A spin ends at the first completion of any kind, or at task work
      // the kernel queued for the ring; a 200 us spin finds the completion
      // of a read from the page cache or a local disk nearly always. The
      // read's completion ends one spin, but another event may end one
      // first and the thread then spins again for the read (a CI run
      // counted 1047 hits for 1024 reads), so the bound is loose: what it
      // rules out is a hit counted twice, e.g. once per queue.
      EXPECT_LE(stats["polls_hit"], reads + reads / 4);
      EXPECT_GT(stats["polls_hit"], reads / 2)
          << "one read at a time, yet 200 us spins rarely found its "
             "completion";
    }
  }
}

// No spin for a flush: at iodepth 1 with an fsync after every write, the
// queue thread spins for each image write's completion, but not for the
// image's fdatasync, which it runs itself (io/flush_policy.h; queued on the
// ring, as at depth, it would not spin for it either: io/spin_policy.h).
// So the spins find about one completion per write, not one per write and
// one per flush, even with spins long enough to outlast any flush; every
// fsync reaches the image as a flush, and the data reads back. Then
// discards, which always go to the ring: no spin finds one.
TEST(PlacementTest, InlineSleepsThroughAFlushOrDiscard) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 8 * kMiB);
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", dir.Path("disk0.img"), "--fuse-io", "uring",
               "--placement", "inline", "--poll-us", "20000"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::vector<std::string> job = {"--rw=randwrite", "--bs=4k",
                                        "--iodepth=1",    "--fsync=1",
                                        "--size=2M",      "--verify=crc32c"};
  std::vector<std::string> write = job;
  write.push_back("--do_verify=0");
  ExpectFioClean(RunCommand(FioCommand(mount.Path("disk0.img"), write),
                            std::chrono::seconds(120)));
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  const uint64_t writes = stats["reqs_write"];
  EXPECT_EQ(writes, 512u);  // 2 MiB of 4 KiB writes, one at a time
  // fio follows every write with an fsync but the last (it ends the job).
  EXPECT_GE(stats["reqs_flush"], writes - 1);
  // As in InlineSpinsForTheLoneCompletion, another event may end a spin
  // before the write's completion, hence the loose bound; a spin per flush
  // would count about twice the writes.
  EXPECT_LE(stats["polls_hit"], writes + writes / 4)
      << "the queue thread spun for flushes";
  EXPECT_GT(stats["polls_hit"], writes / 2)
      << "one write at a time, yet the spins rarely found its completion";

  std::vector<std::string> verify = job;
  verify.push_back("--verify_only");
  ExpectFioClean(RunCommand(FioCommand(mount.Path("disk0.img"), verify),
                            std::chrono::seconds(120)));

  // A discard always goes to the ring (io_uring runs the fallocate on an
  // io-wq worker): the thread sleeps through it too, one at a time, and
  // the range reads back as zeros.
  ResetStats(mount.mountpoint());
  Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  constexpr int kPunches = 256;
  for (int i = 0; i < kPunches; ++i) {
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        off_t{i} * 8192, 4096),
              0)
        << std::strerror(errno);
  }
  stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["reqs_discard"], static_cast<uint64_t>(kPunches));
  EXPECT_LE(stats["polls_hit"], static_cast<uint64_t>(kPunches / 8))
      << "the queue thread spun for discards";
  EXPECT_EQ(PreadAll(fd.get(), 8192 * 7, 4096), std::string(4096, '\0'));
}

// The CPUs the daemon's FUSE uring queue threads may run on, as listed in
// /proc (e.g. "0", "0-1"), indexed by queue (thread pvdisk-fuse-qN).
std::vector<std::string> QueueThreadCpus(pid_t pid) {
  std::vector<std::string> cpus;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::string comm = ReadWholeFile(task.path().string() + "/comm");
    if (comm.rfind("pvdisk-fuse-q", 0) != 0) continue;
    size_t q = std::stoul(comm.substr(13));
    std::string status = ReadWholeFile(task.path().string() + "/status");
    size_t at = status.find("Cpus_allowed_list:");
    if (at == std::string::npos) continue;
    size_t begin = status.find_first_not_of(" \t", at + 18);
    if (cpus.size() <= q) cpus.resize(q + 1);
    cpus[q] = status.substr(begin, status.find('\n', begin) - begin);
  }
  return cpus;
}

// Whether a /proc CPU list ("0-2,5") holds `cpu`.
bool CpuListHas(const std::string& list, int cpu) {
  std::stringstream ranges(list);
  std::string range;
  while (std::getline(ranges, range, ',')) {
    size_t dash = range.find('-');
    int first = std::stoi(range.substr(0, dash));
    int last =
        dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
    if (first <= cpu && cpu <= last) return true;
  }
  return false;
}

// --fuse-queue-pin: on pins each queue thread to its CPU; off leaves them
// to the scheduler; auto (the default) starts on the queue's CPU. The inline
// placement carries verified I/O under each (requests stay on the queue
// their thread drives, wherever it runs).
TEST(PlacementTest, QueueThreadsRunWhereAskedAndCarryVerifiedIo) {
  PVDISK_REQUIRE_FUSE_URING();
  if (OnlineCpus() < 2) GTEST_SKIP() << "needs two online CPUs";
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 32 * kMiB);
  for (const char* pin : {"auto", "on", "off"}) {
    SCOPED_TRACE(pin);
    Mount mount(dir.MakeDir(std::string("mnt-") + pin),
                {"--disk", dir.Path("disk0.img"), "--fuse-io", "uring",
                 "--placement", "inline", "--fuse-queue-pin", pin});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    std::optional<pid_t> pid = DaemonPidOf(mount.mountpoint());
    ASSERT_TRUE(pid.has_value());
    std::vector<std::string> cpus = QueueThreadCpus(*pid);
    ASSERT_EQ(cpus.size(), PossibleCpuCount());
    for (size_t q = 0; q < cpus.size(); ++q) {
      if (std::string(pin) == "off") {
        EXPECT_NE(cpus[q].find_first_of(",-"), std::string::npos) << cpus[q];
      } else {
        EXPECT_EQ(cpus[q], std::to_string(q));
      }
    }
    std::vector<std::string> args = {"--rw=randrw", "--bsrange=4k-256k",
                                     "--iodepth=16", "--verify=crc32c"};
    std::vector<std::string> split = SplitJobs(2, "8M");
    args.insert(args.end(), split.begin(), split.end());
    ExpectFioClean(RunCommand(FioCommand(mount.Path("disk0.img"), args),
                              std::chrono::seconds(180)));
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats.config["fuse_queue_pin"], pin);
    EXPECT_EQ(stats["errors"], 0u);
    EXPECT_EQ(stats["inflight"], 0u);
    ExpectTotalsAgreeWithQueues(stats);
  }
}

// auto: a queue whose requests come several at once (fio iodepth 32 from
// CPU 0) moves its thread off CPU 0; one at a time (iodepth 1 from CPU 0)
// brings it back. Data verified both times.
TEST(PlacementTest, AutoPinFollowsHowRequestsCome) {
  PVDISK_REQUIRE_FUSE_URING();
  if (OnlineCpus() < 2) GTEST_SKIP() << "needs two online CPUs";
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 32 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img"), "--fuse-io",
                                   "uring", "--placement", "inline"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  std::optional<pid_t> pid = DaemonPidOf(mount.mountpoint());
  ASSERT_TRUE(pid.has_value());
  ASSERT_EQ(QueueThreadCpus(*pid)[0], "0");
  // Long enough for many of AutoPin's windows: 16K requests at depth, 8K
  // (four times the way back) at iodepth 1.
  auto fio_from_cpu0 = [&](const char* iodepth, const char* io_size) {
    ExpectFioClean(
        RunCommand(FioCommand(mount.Path("disk0.img"),
                              {"--rw=randrw", "--bs=4k", "--size=16M",
                               std::string("--io_size=") + io_size,
                               std::string("--iodepth=") + iodepth,
                               "--cpus_allowed=0", "--verify=crc32c"}),
                   std::chrono::seconds(180)));
  };
  fio_from_cpu0("32", "64M");
  std::string deep = QueueThreadCpus(*pid)[0];
  EXPECT_FALSE(CpuListHas(deep, 0)) << "queue 0's thread may run on " << deep;
  EXPECT_FALSE(deep.empty());
  fio_from_cpu0("1", "32M");
  EXPECT_EQ(QueueThreadCpus(*pid)[0], "0");
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["fuse_queue_pin"], "auto");
  EXPECT_EQ(stats["errors"], 0u);
}

// Unaligned writes from two CPUs to the same sectors: read-modify-writes
// wait for each other across queues (one queue's completion releases a
// write of the other's), and no write is lost or torn.
//
// The region is cut into 1000-byte slots; the writer on CPU 0 owns the even
// slots, the one on CPU 1 the odd ones, so no byte has two writers, yet
// every slot shares its first and last sector with its neighbours: each
// write is a read-modify-write of sectors the other writer is rewriting at
// the same time. Both walk the region in step, several writes in flight
// (Linux AIO), once per generation; every slot carries its number and the
// generation. After each generation every slot must hold exactly its own
// latest write. An RMW not ordered against its neighbour's writes back the
// neighbour's old bytes: a slot then holds part of (or all of) an older
// generation.
constexpr uint64_t kSlotBytes = 1000;
constexpr uint64_t kSlots = 256;
constexpr uint32_t kGenerations = 24;

// What slot `slot` holds after generation `generation` (0: never written,
// zeros): its number and generation, then bytes made from both.
std::string SlotContents(uint64_t slot, uint32_t generation) {
  if (generation == 0) return std::string(kSlotBytes, '\0');
  std::string bytes = PatternBytes((slot << 32) | generation, kSlotBytes);
  const uint32_t head[2] = {static_cast<uint32_t>(slot), generation};
  std::memcpy(bytes.data(), head, sizeof(head));
  return bytes;
}

// What a slot that should hold `expected` holds, for the failure message.
std::string DescribeSlot(uint64_t slot, uint32_t expected,
                         std::string_view got) {
  for (uint32_t generation = 0; generation <= kGenerations; ++generation) {
    if (got == SlotContents(slot, generation)) {
      return "all of generation " + std::to_string(generation);
    }
  }
  return "a mix (torn), against generation " + std::to_string(expected) + ": " +
         FirstDifference(SlotContents(slot, expected), got, slot * kSlotBytes);
}

// Writes generation `generation` of every slot s with s % 2 == owner, in
// order, up to 8 at a time, from a thread on CPU `cpu`. Returns 0 or the
// errno of what failed.
int WriteOwnSlots(const std::string& path, int owner, uint32_t generation,
                  int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
    return EINVAL;
  }
  Fd fd = Open(path, O_WRONLY | O_DIRECT);
  if (!fd.valid()) return errno;
  constexpr unsigned kDepth = 8;
  aio_context_t context = 0;
  if (IoSetup(kDepth, &context) != 0) return errno;
  std::vector<std::string> data;
  std::vector<iocb> iocbs(kSlots);
  for (uint64_t slot = owner; slot < kSlots; slot += 2) {
    data.push_back(SlotContents(slot, generation));
  }
  int error = 0;
  unsigned in_flight = 0;
  size_t next = 0;
  while (error == 0 && (next < data.size() || in_flight > 0)) {
    while (next < data.size() && in_flight < kDepth) {
      const uint64_t slot = owner + 2 * next;
      iocb& cb = iocbs[next];
      std::memset(&cb, 0, sizeof(cb));
      cb.aio_lio_opcode = IOCB_CMD_PWRITE;
      cb.aio_fildes = static_cast<uint32_t>(fd.get());
      cb.aio_buf = reinterpret_cast<uint64_t>(data[next].data());
      cb.aio_nbytes = kSlotBytes;
      cb.aio_offset = static_cast<int64_t>(slot * kSlotBytes);
      if (IoSubmit(context, &cb) != 1) {
        error = errno;
        break;
      }
      ++in_flight;
      ++next;
    }
    if (error != 0 || in_flight == 0) break;
    io_event events[kDepth];
    int got = IoGetEvents(context, kDepth, events);
    if (got <= 0) {
      error = errno;
      break;
    }
    for (int e = 0; e < got; ++e) {
      if (events[e].res != static_cast<int64_t>(kSlotBytes)) {
        error = events[e].res < 0 ? static_cast<int>(-events[e].res) : EIO;
      }
      --in_flight;
    }
  }
  IoDestroy(context);  // waits for what is still in flight
  return error;
}

TEST(PlacementTest, InlineOverlappingUnalignedWritesFromTwoCpus) {
  PVDISK_REQUIRE_FUSE_URING();
  if (OnlineCpus() < 2) GTEST_SKIP() << "needs two online CPUs";
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 8 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img"), "--fuse-io",
                                   "uring", "--placement", "inline"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string disk = mount.Path("disk0.img");
  Fd check = Open(disk, O_RDONLY | O_DIRECT);
  ASSERT_TRUE(check.valid()) << std::strerror(errno);
  for (uint32_t generation = 1; generation <= kGenerations; ++generation) {
    int errors[2] = {0, 0};
    std::thread even(
        [&] { errors[0] = WriteOwnSlots(disk, 0, generation, 0); });
    std::thread odd([&] { errors[1] = WriteOwnSlots(disk, 1, generation, 1); });
    even.join();
    odd.join();
    ASSERT_EQ(errors[0], 0) << "CPU 0's writes: " << std::strerror(errors[0]);
    ASSERT_EQ(errors[1], 0) << "CPU 1's writes: " << std::strerror(errors[1]);
    const std::string region = PreadAll(check.get(), 0, kSlots * kSlotBytes);
    int wrong = 0;
    std::string why;
    for (uint64_t slot = 0; slot < kSlots; ++slot) {
      std::string_view got(region.data() + slot * kSlotBytes, kSlotBytes);
      if (got == SlotContents(slot, generation)) continue;
      if (++wrong <= 3) {
        why += "\n  slot " + std::to_string(slot) + " (CPU " +
               std::to_string(slot % 2) + "'s) holds " +
               DescribeSlot(slot, generation, got);
      }
    }
    ASSERT_EQ(wrong, 0) << "generation " << generation << ": " << wrong
                        << " of " << kSlots
                        << " slots do not hold their latest write:" << why;
  }
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_GT(stats.queues[0]["reqs_write"], 0u);
  EXPECT_GT(stats.queues[1]["reqs_write"], 0u);
}

// Under auto, a flag that only backend threads honour chooses them.
TEST(PlacementTest, AutoTakesBackendThreadsWhenAQueueFlagAsks) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 8 * kMiB);
  const std::vector<std::vector<std::string>> flag_sets = {
      {"--queues", "3"},
      {"--queue-map", "round-robin"},
      {"--backend-threads", "1"},
      {"--irq", "thread"},
  };
  for (size_t i = 0; i < flag_sets.size(); ++i) {
    const std::vector<std::string>& flags = flag_sets[i];
    std::vector<std::string> args = {"--disk", dir.Path("disk0.img"),
                                     "--fuse-io", "uring"};
    args.insert(args.end(), flags.begin(), flags.end());
    Mount mount(dir.MakeDir("mnt" + std::to_string(i)), args);
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats.config["placement"], "backend-thread") << flags[0];
    EXPECT_EQ(stats.config["fuse_io"], "uring") << flags[0];
  }
}

TEST(PlacementTest, NonsenseCombinationsAreRefusedNamingTheFlag) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 8 * kMiB);
  const std::string mnt = dir.MakeDir("mnt");
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"--placement", "sideways"}, "--placement 'sideways' is not allowed"},
      {{"--placement", "inline", "--fuse-io", "classic"},
       "--placement inline needs --fuse-io uring"},
      {{"--placement", "inline", "--fuse-threads", "2"},
       "--placement inline needs --fuse-io uring"},
  };
  if (access("/sys/module/fuse/parameters/enable_uring", F_OK) == 0) {
    const std::string other_count = std::to_string(PossibleCpuCount() + 1);
    std::vector<Case> uring_cases = {
        {{"--queues", other_count}, "--queues " + other_count},
        {{"--queue-map", "offset"}, "--queue-map offset"},
        {{"--backend-threads", "1"}, "--backend-threads 1"},
        {{"--irq", "thread"}, "--irq thread"},
    };
    for (Case& c : uring_cases) {
      c.flags.insert(c.flags.begin(),
                     {"--fuse-io", "uring", "--placement", "inline"});
      c.message += " does not go with --placement inline";
      cases.push_back(c);
    }
  }
  for (const Case& c : cases) {
    std::vector<std::string> args = {"mount", mnt, "--disk", image};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    CommandResult result = RunPvdisk(args);
    ExpectUsageError(result);
    EXPECT_NE(result.err.find(c.message), std::string::npos)
        << result.Describe();
    EXPECT_FALSE(IsMounted(mnt));
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
