// The transport options of `pvdisk mount` on real mounts, per frontend:
// queues, ring size, engine cap, max segments, persistent grants,
// notification mode, polling, queue maps and backend threads. Each mount
// first passes an fio crc32c verify job, then its counters must show the
// option at work. Every fio run stays within 64 MiB or a few seconds.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kImageBytes = 128 * kMiB;

// `pvdisk mount` arguments: one disk served by `frontend`, then `flags`.
std::vector<std::string> MountArgs(const std::string& image,
                                   const std::string& frontend,
                                   const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"--disk", image, "--frontend", frontend};
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

// Runs fio on the mount's disk0.img with `job`.
CommandResult RunFio(const Mount& mount, const std::vector<std::string>& job) {
  return RunCommand(FioCommand(mount.Path("disk0.img"), job),
                    std::chrono::seconds(120));
}

// Random writes of `bs` (e.g. "4k", "4k-1m") at iodepth 32 over `size`, then
// fio reads everything back and checks the crc32c of every block.
std::vector<std::string> VerifyJob(const std::string& bs = "4k",
                                   const std::string& size = "32M") {
  std::vector<std::string> job = {"--rw=randwrite", "--iodepth=32",
                                  "--size=" + size, "--verify=crc32c",
                                  "--do_verify=1"};
  job.push_back(bs.find('-') == std::string::npos ? "--bs=" + bs
                                                  : "--bsrange=" + bs);
  return job;
}

// Random 4 KiB reads at `iodepth` for at most `seconds` over 64 MiB.
std::vector<std::string> RandomReadJob(int iodepth, int seconds,
                                       bool time_based = false) {
  std::vector<std::string> job = {
      "--rw=randread", "--bs=4k", "--iodepth=" + std::to_string(iodepth),
      "--size=64M", "--runtime=" + std::to_string(seconds)};
  if (time_based) job.push_back("--time_based");
  return job;
}

// `count` random 4 KiB reads at `iodepth` over the first 64 MiB, however
// long they take: for tests that count what the reads did. A time limit
// made the count depend on the machine's disk that second: in a run of the
// suite four at a time beside two busy loops, two 2 s jobs got 32 reads
// each and fio still ended cleanly. The stall ended by itself, and nothing
// on pvdisk's inline path wakes on a timer, so those reads waited on the
// kernel (the image's disk or the CPUs), not on a lost wake-up, which
// would have hung fio.
std::vector<std::string> FixedCountRandomReadJob(int iodepth, int count) {
  return {"--rw=randread", "--bs=4k", "--iodepth=" + std::to_string(iodepth),
          "--size=64M", "--io_size=" + std::to_string(count * 4) + "k"};
}

// What every mount must show once fio is done: no errors, nothing in
// flight, one row per configured queue, totals that agree with the rows.
void ExpectHealthy(const DiskStats& stats) {
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["invalid_reqs"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_EQ(stats.queues.size(), ConfigNumber(stats, "queues"));
  ExpectTotalsAgreeWithQueues(stats);
}

uint64_t QueueCounter(const DiskStats& stats, size_t q,
                      const std::string& name) {
  auto it = stats.queues[q].find(name);
  if (it == stats.queues[q].end()) {
    ADD_FAILURE() << "queue " << q << " has no " << name;
    return 0;
  }
  return it->second;
}

// Every queue carried writes.
void ExpectEveryQueueWrote(const DiskStats& stats) {
  for (size_t q = 0; q < stats.queues.size(); ++q) {
    EXPECT_GT(QueueCounter(stats, q, "reqs_write"), 0u)
        << "queue " << q << " of " << stats.queues.size() << " was not used";
  }
}

// The first line of MOUNTPOINT/stats: "# disk NAME: key=value ...".
std::string StatsHeaderLine(const Mount& mount) {
  std::string text = ReadWholeFile(mount.Path("stats"));
  return text.substr(0, text.find('\n'));
}

// Names "blkif_4" etc. for (frontend, anything printable) parameters.
template <typename T>
std::string PairName(
    const ::testing::TestParamInfo<std::tuple<std::string, T>>& info) {
  std::string second;
  if constexpr (std::is_same_v<T, std::string>) {
    second = std::get<1>(info.param);
  } else {
    second = std::to_string(std::get<1>(info.param));
  }
  for (char& c : second) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return FrontendTestName(std::get<0>(info.param)) + "_" + second;
}

std::string FrontendName(const ::testing::TestParamInfo<std::string>& info) {
  return FrontendTestName(info.param);
}

// ---------------------------------------------------------------------------
// --queues: 1, 4 and 16 queues verify, and random writes use every queue
// (the default offset map sends each 1 MiB stripe to queue stripe % N, and
// 32 MiB of random 4 KiB writes touch all 32 stripes: two per queue at 16).

class QueueCountTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(QueueCountTest, VerifiesAndEveryQueueCarriesWrites) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, queues] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(dir.MakeDir("mnt"),
              MountArgs(image, frontend, {"--queues", std::to_string(queues)}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k", "32M")));

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["frontend"], frontend);
  EXPECT_EQ(ConfigNumber(stats, "queues"), static_cast<uint64_t>(queues));
  ASSERT_EQ(stats.queues.size(), static_cast<size_t>(queues));
  ExpectHealthy(stats);
  EXPECT_GE(stats["sectors_written"], 32 * kMiB / 512);
  ExpectEveryQueueWrote(stats);
}

INSTANTIATE_TEST_SUITE_P(Frontends, QueueCountTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values(1, 4, 16)),
                         PairName<int>);
// nvme: one queue pair per queue, 4 of them.
INSTANTIATE_TEST_SUITE_P(Nvme, QueueCountTest,
                         ::testing::Values(std::make_tuple(std::string("nvme"),
                                                           4)),
                         PairName<int>);

// ---------------------------------------------------------------------------
// --ring-size: the smallest ring and a large one verify with requests of up
// to 1 MiB, and no queue ever has more requests in flight than its ring.

class RingSizeTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(RingSizeTest, VerifiesWithinTheRing) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, ring_size] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(
      dir.MakeDir("mnt"),
      MountArgs(image, frontend, {"--ring-size", std::to_string(ring_size)}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k-1m", "32M")));

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(ConfigNumber(stats, "ring_size"), static_cast<uint64_t>(ring_size));
  ExpectHealthy(stats);
  EXPECT_GE(stats["inflight_max"], 2u);
  for (size_t q = 0; q < stats.queues.size(); ++q) {
    EXPECT_LE(QueueCounter(stats, q, "inflight_max"),
              static_cast<uint64_t>(ring_size))
        << "queue " << q << " had more in flight than its ring holds";
  }
}

INSTANTIATE_TEST_SUITE_P(Frontends, RingSizeTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values(32, 1024)),
                         PairName<int>);

// ---------------------------------------------------------------------------
// A deep queue fills a large ring: fio at iodepth 1024 on one queue of 1024
// entries keeps far more than 128 requests on the ring and at the engine;
// with --engine-max-inflight 128 the engine never holds more than 128 while
// the ring still fills.

class DeepQueueTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(DeepQueueTest, RingAndEngineFillUpToTheCap) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, cap] = GetParam();
  const bool capped = cap != "none";
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  std::vector<std::string> flags = {"--ring-size", "1024", "--queues", "1"};
  if (capped) flags.insert(flags.end(), {"--engine-max-inflight", cap});
  // On the uring channel the FUSE queue of the CPU fio runs on must hold
  // the whole depth too.
  if (TestFuseIo() == "uring") {
    flags.insert(flags.end(),
                 {"--fuse-io", "uring", "--fuse-queue-depth", "1024"});
  }
  Mount mount(dir.MakeDir("mnt"), MountArgs(image, frontend, flags));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  CommandResult fio =
      RunFio(mount, RandomReadJob(1024, 1, /*time_based=*/true));
  EXPECT_EQ(fio.exit_code, 0) << fio.Describe();

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["engine_max_inflight"], cap);
  EXPECT_EQ(ConfigNumber(stats, "ring_size"), 1024u);
  ExpectHealthy(stats);
  EXPECT_GT(stats["reqs_read"], 0u);
  EXPECT_GT(stats["inflight_max"], 128u) << "the ring never filled";
  EXPECT_LE(stats["inflight_max"], 1024u);
  if (capped) {
    EXPECT_GT(stats["engine_inflight_max"], 0u);
    EXPECT_LE(stats["engine_inflight_max"], 128u) << "the cap was exceeded";
  } else {
    EXPECT_GT(stats["engine_inflight_max"], 128u)
        << "the engine never had more than 128 I/Os in flight";
    EXPECT_LE(stats["engine_inflight_max"], 1024u);
  }

  // The capped backend still serves writes correctly.
  ExpectFioClean(RunFio(mount, VerifyJob("4k", "16M")));
  DiskStats after = StatsOf(mount.mountpoint(), "disk0.img");
  ExpectHealthy(after);
  if (capped) {
    EXPECT_LE(after["engine_inflight_max"], 128u);
  }
}

std::string DeepQueueName(
    const ::testing::TestParamInfo<std::tuple<std::string, std::string>>&
        info) {
  return FrontendTestName(std::get<0>(info.param)) + "_EngineMaxInflight_" +
         std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Frontends, DeepQueueTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values("none", "128")),
                         DeepQueueName);
// nvme: a queue pair of 1024 entries holds 1023 commands.
INSTANTIATE_TEST_SUITE_P(Nvme, DeepQueueTest,
                         ::testing::Values(std::make_tuple(
                             std::string("nvme"), std::string("none"))),
                         DeepQueueName);

// ---------------------------------------------------------------------------
// --max-segments: verify, then 64 MiB of sequential 1 MiB reads. FUSE hands
// over 1 MiB requests; a ring request carries at most S pages (8 sectors
// each), so 1 MiB needs 1 request with 256, 8 with 32 and 24 with 11.

class MaxSegmentsTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MaxSegmentsTest, LargeReadsSplitIntoRequestsOfAtMostSPages) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, segments] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(
      dir.MakeDir("mnt"),
      MountArgs(image, frontend, {"--max-segments", std::to_string(segments)}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k-1m", "32M")));
  DiskStats verified = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(ConfigNumber(verified, "max_segments"),
            static_cast<uint64_t>(segments));
  ExpectHealthy(verified);

  ResetStats(mount.mountpoint());
  CommandResult fio =
      RunFio(mount, {"--rw=read", "--bs=1m", "--iodepth=4", "--size=64M"});
  EXPECT_EQ(fio.exit_code, 0) << fio.Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  ExpectHealthy(stats);
  EXPECT_EQ(stats["reqs_write"], 0u);
  EXPECT_EQ(stats["sectors_read"], 64 * kMiB / 512);
  const uint64_t requests = stats["reqs_read"];
  ASSERT_GT(requests, 0u);
  const double sectors_per_request =
      static_cast<double>(stats["sectors_read"]) / requests;
  EXPECT_LE(stats["segments"], static_cast<uint64_t>(segments) * requests)
      << "a request carried more than " << segments << " pages";
  switch (segments) {
    case 256:
      EXPECT_GE(sectors_per_request, 1900.0) << requests << " requests";
      EXPECT_EQ(stats["splits"], 0u);
      break;
    case 32:
      EXPECT_GE(sectors_per_request, 240.0) << requests << " requests";
      EXPECT_LE(sectors_per_request, 260.0) << requests << " requests";
      EXPECT_GT(stats["splits"], 0u);
      break;
    case 11:
      EXPECT_LE(sectors_per_request, 88.0) << requests << " requests";
      EXPECT_GT(stats["splits"], 0u);
      break;
    default:
      FAIL() << "no expectations for " << segments << " segments";
  }
  if (segments > 11) {
    EXPECT_GT(stats["indirect_reqs"], 0u)
        << "requests of more than 11 pages need indirect segments";
  } else if (frontend == "blkif") {
    // Only direct requests. (virtio puts anything over 2 pages in an
    // indirect descriptor table whatever S is.)
    EXPECT_EQ(stats["indirect_reqs"], 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Frontends, MaxSegmentsTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values(11, 32, 256)),
                         PairName<int>);
// nvme: the smallest MDTS (11 pages: a PRP list per request).
INSTANTIATE_TEST_SUITE_P(Nvme, MaxSegmentsTest,
                         ::testing::Values(std::make_tuple(std::string("nvme"),
                                                           11)),
                         PairName<int>);

// ---------------------------------------------------------------------------
// --persistent: with persistent grants the data pages are mapped once (no
// per-request maps) and registered with io_uring; without, every request
// maps its pages and unmaps them when answered.

class PersistentTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(PersistentTest, VerifiesAndMapsPagesOnlyWhenNotPersistent) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, persistent] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(dir.MakeDir("mnt"),
              MountArgs(image, frontend,
                        {"--persistent", persistent, "--engine", "uring"}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k-1m", "32M")));

  const std::string header = StatsHeaderLine(mount);
  EXPECT_NE(header.find(" persistent=" + persistent + " "), std::string::npos)
      << header;
  EXPECT_NE(header.find(" engine=uring "), std::string::npos) << header;
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  ExpectHealthy(stats);
  EXPECT_EQ(stats.config["persistent"], persistent);
  if (persistent == "on") {
    EXPECT_NE(header.find(" fixed_buffers=yes"), std::string::npos) << header;
    EXPECT_EQ(stats.config["fixed_buffers"], "yes");
    EXPECT_EQ(stats["grant_maps"], 0u);
    EXPECT_EQ(stats["grant_unmaps"], 0u);
  } else {
    EXPECT_NE(header.find(" fixed_buffers=no"), std::string::npos) << header;
    EXPECT_GT(stats["grant_maps"], 0u);
    // Every mapping is undone once the disk is idle.
    EXPECT_TRUE(WaitUntil(
        [&] {
          DiskStats now = StatsOf(mount.mountpoint(), "disk0.img");
          return now["inflight"] == 0 &&
                 now["grant_maps"] == now["grant_unmaps"];
        },
        std::chrono::seconds(5)));
    stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_EQ(stats["grant_maps"], stats["grant_unmaps"]);
    for (size_t q = 0; q < stats.queues.size(); ++q) {
      EXPECT_EQ(QueueCounter(stats, q, "grant_maps"),
                QueueCounter(stats, q, "grant_unmaps"))
          << "queue " << q;
    }
    // At least one page per data request.
    EXPECT_GE(stats["grant_maps"], stats["reqs_read"] + stats["reqs_write"]);
  }
}

INSTANTIATE_TEST_SUITE_P(Frontends, PersistentTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values("on", "off")),
                         PairName<std::string>);
// nvme with pages mapped per request (PRP lists read through them too);
// persistent grants are its default in the other nvme tests.
INSTANTIATE_TEST_SUITE_P(Nvme, PersistentTest,
                         ::testing::Values(std::make_tuple(std::string("nvme"),
                                                           std::string("off"))),
                         PairName<std::string>);

// ---------------------------------------------------------------------------
// --notify: verify, then random reads at iodepth 32. With event indexes the
// peers skip notifications the other side did not ask for; blkif with
// "always" notifies on every push. (virtio's "always" is the ring without
// event indexes, where the NO_NOTIFY / NO_INTERRUPT flags may still
// suppress notifications, so there is nothing to say about zero there.)

class NotifyTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(NotifyTest, EventIndexesSuppressNotifications) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, notify] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(dir.MakeDir("mnt"),
              MountArgs(image, frontend, {"--notify", notify}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k", "32M")));
  ExpectHealthy(StatsOf(mount.mountpoint(), "disk0.img"));

  ResetStats(mount.mountpoint());
  CommandResult fio = RunFio(mount, FixedCountRandomReadJob(32, 4096));
  EXPECT_EQ(fio.exit_code, 0) << fio.Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["notify"], notify);
  ExpectHealthy(stats);
  EXPECT_GT(stats["reqs_read"], 1000u);
  EXPECT_GT(stats["kicks_sent"], 0u);
  EXPECT_GT(stats["irqs_sent"], 0u);
  if (notify == "event-idx") {
    EXPECT_GT(stats["kicks_suppressed"] + stats["irqs_suppressed"], 0u)
        << "no notification was ever suppressed";
  } else if (frontend == "blkif") {
    EXPECT_EQ(stats["kicks_suppressed"], 0u);
    EXPECT_EQ(stats["irqs_suppressed"], 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Frontends, NotifyTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values("event-idx",
                                                              "always")),
                         PairName<std::string>);
// nvme: plain doorbells (shadow doorbells, event-idx, are its default in
// the other nvme tests).
INSTANTIATE_TEST_SUITE_P(Nvme, NotifyTest,
                         ::testing::Values(std::make_tuple(
                             std::string("nvme"), std::string("always"))),
                         PairName<std::string>);

// ---------------------------------------------------------------------------
// --irq and --fuse-threads: wherever a queue's interrupts are taken (inline
// on the backend thread, or by a completion thread) and however many FUSE
// workers read /dev/fuse (one reads every request itself), data verifies,
// every FUSE read becomes a ring request, and interrupts are counted (the
// protocol decides when to interrupt, not where the handler runs).
// Parameters: frontend, "flag=value".

class ThreadingTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ThreadingTest, VerifiesAndCountsInterrupts) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, setting] = GetParam();
  const size_t equals = setting.find('=');
  const std::string flag = setting.substr(0, equals);
  const std::string value = setting.substr(equals + 1);
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(dir.MakeDir("mnt"),
              MountArgs(image, frontend, {"--" + flag, value}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k", "32M")));
  ResetStats(mount.mountpoint());
  CommandResult fio = RunFio(mount, FixedCountRandomReadJob(32, 4096));
  EXPECT_EQ(fio.exit_code, 0) << fio.Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  if (flag == "irq") {
    EXPECT_EQ(stats.config["irq"], value);
  }
  ExpectHealthy(stats);
  EXPECT_GT(stats["reqs_read"], 1000u);
  EXPECT_GT(stats["irqs_sent"], 0u);
  EXPECT_EQ(stats["fuse_reads"], stats["reqs_read"] + stats["merges_read"]);
}

INSTANTIATE_TEST_SUITE_P(
    Frontends, ThreadingTest,
    ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                       ::testing::Values("irq=inline", "irq=thread",
                                         "fuse-threads=1", "fuse-threads=8")),
    PairName<std::string>);
// nvme: completions consumed by a completion thread.
INSTANTIATE_TEST_SUITE_P(Nvme, ThreadingTest,
                         ::testing::Values(std::make_tuple(
                             std::string("nvme"), std::string("irq=thread"))),
                         PairName<std::string>);

// ---------------------------------------------------------------------------
// --poll-us on a backend thread: a polling backend verifies, and at iodepth
// 1 (the backend idle between requests, the only time it polls) its polls
// find the next request. (Inline, the queue thread spins for completions:
// placement_test.cc.)

class PollTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PollTest, VerifiesAndPollsFindWork) {
  PVDISK_REQUIRE_FIO();
  const std::string& frontend = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(dir.MakeDir("mnt"),
              MountArgs(image, frontend,
                        {"--poll-us", "100", "--placement", "backend-thread"}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k", "32M")));
  ResetStats(mount.mountpoint());
  CommandResult fio = RunFio(mount, RandomReadJob(1, 2));
  EXPECT_EQ(fio.exit_code, 0) << fio.Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(ConfigNumber(stats, "poll_us"), 100u);
  ExpectHealthy(stats);
  EXPECT_GT(stats["polls_hit"], 0u)
      << "one request at a time, yet 100 us polls never found the next";
}

INSTANTIATE_TEST_SUITE_P(Frontends, PollTest,
                         ::testing::ValuesIn(AllFrontends()), FrontendName);
INSTANTIATE_TEST_SUITE_P(Nvme, PollTest, ::testing::Values("nvme"),
                         FrontendName);

// ---------------------------------------------------------------------------
// --queue-map thread / round-robin (offset, the default, is everywhere
// else), on 4 queues.

class QueueMapTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(QueueMapTest, VerifiesOnFourQueues) {
  PVDISK_REQUIRE_FIO();
  const auto& [frontend, map] = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(
      dir.MakeDir("mnt"),
      MountArgs(image, frontend, {"--queue-map", map, "--queues", "4"}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k-256k", "32M")));
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["queue_map"], map);
  ASSERT_EQ(stats.queues.size(), 4u);
  ExpectHealthy(stats);
  EXPECT_GT(stats["reqs_write"], 0u);
  if (map == "round-robin") {
    // Each FUSE request goes to the next queue, whatever its offset.
    ExpectEveryQueueWrote(stats);
  }
}

INSTANTIATE_TEST_SUITE_P(Frontends, QueueMapTest,
                         ::testing::Combine(::testing::ValuesIn(AllFrontends()),
                                            ::testing::Values("thread",
                                                              "round-robin")),
                         PairName<std::string>);
// nvme: round-robin, which must reach every queue pair.
INSTANTIATE_TEST_SUITE_P(Nvme, QueueMapTest,
                         ::testing::Values(std::make_tuple(
                             std::string("nvme"), std::string("round-robin"))),
                         PairName<std::string>);

// ---------------------------------------------------------------------------
// --backend-threads: two backend threads share four queues.

class BackendThreadsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendThreadsTest, TwoThreadsServeFourQueues) {
  PVDISK_REQUIRE_FIO();
  const std::string& frontend = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(
      dir.MakeDir("mnt"),
      MountArgs(image, frontend, {"--queues", "4", "--backend-threads", "2"}));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k", "32M")));
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(ConfigNumber(stats, "backend_threads"), 2u);
  ASSERT_EQ(stats.queues.size(), 4u);
  ExpectHealthy(stats);
  ExpectEveryQueueWrote(stats);
}

INSTANTIATE_TEST_SUITE_P(Frontends, BackendThreadsTest,
                         ::testing::ValuesIn(AllFrontends()), FrontendName);
INSTANTIATE_TEST_SUITE_P(Nvme, BackendThreadsTest, ::testing::Values("nvme"),
                         FrontendName);

// ---------------------------------------------------------------------------
// Rings larger than blkif allows: `pvdisk mount --help` promises virtio
// and virtio-packed rings up to 32768 entries, so these must mount and
// serve.

struct LargeRingCase {
  const char* name;
  std::vector<std::string> flags;
  uint64_t ring_size;
  std::string frontend = "virtio";
};

void PrintTo(const LargeRingCase& c, std::ostream* os) { *os << c.name; }

class LargeRingTest : public ::testing::TestWithParam<LargeRingCase> {};

TEST_P(LargeRingTest, MountsAndVerifies) {
  PVDISK_REQUIRE_FIO();
  const LargeRingCase& c = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, kImageBytes);
  Mount mount(dir.MakeDir("mnt"), MountArgs(image, c.frontend, c.flags));
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  ExpectFioClean(RunFio(mount, VerifyJob("4k", "16M")));
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["frontend"], c.frontend);
  EXPECT_EQ(ConfigNumber(stats, "ring_size"), c.ring_size);
  ExpectHealthy(stats);
  EXPECT_LE(stats["inflight_max"], c.ring_size);
}

INSTANTIATE_TEST_SUITE_P(
    Virtio, LargeRingTest,
    ::testing::Values(
        LargeRingCase{"Ring8192", {"--ring-size", "8192"}, 8192},
        // The largest ring the help allows, with the fewest queues.
        LargeRingCase{"Ring32768OneQueue",
                      {"--ring-size", "32768", "--queues", "1"},
                      32768},
        // The packed ring at the sizes RingSizeTest does not cover, with
        // 256-page requests and event suppression off.
        LargeRingCase{"PackedRing256Always",
                      {"--ring-size", "256", "--notify", "always"},
                      256,
                      "virtio-packed"},
        LargeRingCase{
            "PackedRing32768OneQueue",
            {"--ring-size", "32768", "--queues", "1", "--persistent", "off"},
            32768,
            "virtio-packed"}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------
// Ring sizes and queue counts that are each within their documented range
// but together large: the mount either serves the disk or is refused as a
// usage error that says which flag to change -- never an error about
// something the user cannot set.

struct RingLimitCase {
  const char* name;
  std::vector<std::string> flags;  // after --disk IMAGE
};

void PrintTo(const RingLimitCase& c, std::ostream* os) { *os << c.name; }

class RingLimitTest : public ::testing::TestWithParam<RingLimitCase> {};

TEST_P(RingLimitTest, MountsOrNamesTheFlagAtFault) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 16 * kMiB);
  std::vector<std::string> args = {"--disk", image};
  args.insert(args.end(), GetParam().flags.begin(), GetParam().flags.end());
  Mount mount(dir.MakeDir("mnt"), args);
  if (!mount.ok()) {
    const CommandResult& result = mount.mount_result();
    EXPECT_EQ(result.exit_code, 2) << result.Describe();
    EXPECT_EQ(result.err.rfind("pvdisk: ", 0), 0u) << result.Describe();
    EXPECT_TRUE(result.err.find("--ring-size") != std::string::npos ||
                result.err.find("--queues") != std::string::npos ||
                result.err.find("--backend-threads") != std::string::npos)
        << "refused without naming --ring-size, --queues or "
           "--backend-threads: "
        << result.Describe();
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
        << result.Describe();
    EXPECT_FALSE(IsMounted(mount.mountpoint()));
    return;
  }
  Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  const std::string data = PatternBytes(101, 3 * kMiB + 4096);
  PwriteAll(fd.get(), 5 * kMiB, data);
  EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), 5 * kMiB, data.size()),
                            5 * kMiB),
            "");
  ASSERT_EQ(fd.Close(), 0);
  ExpectHealthy(StatsOf(mount.mountpoint(), "disk0.img"));
}

INSTANTIATE_TEST_SUITE_P(
    Combinations, RingLimitTest,
    ::testing::Values(RingLimitCase{"Blkif4096x8Queues",
                                    {"--frontend", "blkif", "--ring-size",
                                     "4096", "--queues", "8"}},
                      RingLimitCase{"Virtio16384x2Queues",
                                    {"--frontend", "virtio", "--ring-size",
                                     "16384", "--queues", "2"}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pvdisk::fuse_testing
