// The device latency model (`--disk IMG,delay=US[,delay-write=US]`) through
// a real mount: fio sees the delay as its latency and the stats agree; an
// engine cap then limits IOPS as it would on a remote disk; data survives
// completions held out of order; an unmount with completions held finishes.
//
// A latency model is judged by the latency it adds, so two of these checks
// compare times. They hold with a wide margin on an idle machine; on a
// loaded one, scheduling can only add latency, so each such measurement is
// taken up to three times and the best attempt counts; the latency the
// delay adds is measured against an undelayed disk run beside it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "stats/json_reader.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr int kAttempts = 3;

// What one fio run reports for its reads.
struct FioReads {
  double iops = 0;
  double mean_us = 0;  // completion latency from fio's submission
  double min_us = 0;
  double median_us = 0;  // completion latency's 50th percentile (fio's clat)
};

// Runs fio with JSON output on `file`; nullopt (and a test failure) if it
// failed or its output cannot be read.
std::optional<FioReads> RunFio(const std::string& file,
                               std::vector<std::string> args) {
  args.push_back("--output-format=json");
  CommandResult fio =
      RunCommand(FioCommand(file, args), std::chrono::seconds(120));
  EXPECT_EQ(fio.exit_code, 0) << fio.Describe();
  if (fio.exit_code != 0) return std::nullopt;
  // fio may print notes before the JSON document.
  const size_t start = fio.out.find('{');
  std::string error;
  std::optional<JsonValue> json = ParseJson(
      start == std::string::npos ? "" : fio.out.substr(start), &error);
  const JsonValue* jobs = json ? json->Find("jobs") : nullptr;
  const JsonValue* read =
      jobs && !jobs->array.empty() ? jobs->array[0].Find("read") : nullptr;
  const JsonValue* lat = read ? read->Find("lat_ns") : nullptr;
  const JsonValue* iops = read ? read->Find("iops") : nullptr;
  const JsonValue* mean = lat ? lat->Find("mean") : nullptr;
  const JsonValue* min = lat ? lat->Find("min") : nullptr;
  const JsonValue* clat = read ? read->Find("clat_ns") : nullptr;
  const JsonValue* percentiles = clat ? clat->Find("percentile") : nullptr;
  const JsonValue* median =
      percentiles ? percentiles->Find("50.000000") : nullptr;
  if (iops == nullptr || mean == nullptr || min == nullptr ||
      median == nullptr) {
    ADD_FAILURE() << "unreadable fio output (" << error << "): " << fio.out;
    return std::nullopt;
  }
  return FioReads{iops->number, mean->number / 1000, min->number / 1000,
                  median->number / 1000};
}

// On the uring channel each CPU's FUSE queue holds 128 requests by default,
// but as many as the ring has slots when a disk has a delay (no
// --fuse-queue-depth given): then the ring and the engine cap are what
// limit the depth.
std::vector<std::string> UringFuseWhereTested() {
  if (TestFuseIo() != "uring") return {};
  return {"--fuse-io", "uring"};
}

class DelayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DelayTest, NullDiskShowsTheDelayInFioAndInTheStats) {
  PVDISK_REQUIRE_FIO();
  const std::string& frontend = GetParam();
  TempDir dir;
  // Two images: each mount takes its image's lock.
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string plain_image = dir.MakeDir("plain") + "/disk0.img";
  CreateImage(plain_image, 64 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",delay=2000", "--engine",
                                   "null", "--frontend", frontend});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  // The same disk without the delay: the path's own cost, measured beside
  // each delayed run so that the host's load of the moment cancels out.
  Mount plain(dir.MakeDir("plain_mnt"), {"--disk", plain_image, "--engine",
                                         "null", "--frontend", frontend});
  ASSERT_TRUE(plain.ok()) << plain.mount_result().Describe();

  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["delay_us"], "2000");
  EXPECT_EQ(stats.config["delay_write_us"], "2000");
  EXPECT_NE(stats.config["engine_mode"].find(
                "completions held 2000 us after submission"),
            std::string::npos)
      << stats.config["engine_mode"];

  // One request at a time: its latency is the delay plus the path's own
  // cost, tens of microseconds (idle here: fio's mean 2096-2100 us, median
  // 2073). Each request takes two wake-ups from sleep, fio's and the queue
  // thread's, and on a loaded host a few of them take milliseconds: with
  // two busy loops beside it fio's maximum was 7.5-8.1 ms, its mean 2130
  // and its median 2056-2073 us; on loaded CI hosts the mean of the best of
  // three runs came to 2200-2310 us, and once even the best median to 2212.
  // So the model's bound, within 10% of 2 ms, is checked on what the delay adds
  // to fio's median over the undelayed disk's, run just before it; the
  // mean only for a delay applied twice (4 ms); and the stats' median,
  // taken inside pvdisk from submission to completion, in the histogram
  // bucket that holds 2 ms + 10% (2097 < x <= 2359.3 us; p50 is the
  // bucket's upper bound, shown as 2360).
  // 1000 reads, however long they take: 2 s on the delayed disk, a
  // fraction of a second on the undelayed one.
  const std::vector<std::string> job = {"--rw=randread", "--bs=4k",
                                        "--iodepth=1", "--io_size=4000k"};
  std::optional<FioReads> best;
  double best_added_us = 1e9;
  uint64_t best_p50 = UINT64_MAX;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::optional<FioReads> undelayed = RunFio(plain.Path("disk0.img"), job);
    ASSERT_TRUE(undelayed.has_value());
    ResetStats(mount.mountpoint());
    std::optional<FioReads> reads = RunFio(mount.Path("disk0.img"), job);
    ASSERT_TRUE(reads.has_value());
    // Never early, whatever the load.
    EXPECT_GE(reads->min_us, 2000) << "a completion came before its delay";
    stats = StatsOf(mount.mountpoint(), "disk0.img");
    const double added_us = reads->median_us - undelayed->median_us;
    if (!best || added_us < best_added_us) {
      best = reads;
      best_added_us = added_us;
    }
    best_p50 = std::min(best_p50, stats["lat_us_p50"]);
    if (best_added_us <= 2200 && best->mean_us < 3000 && best_p50 <= 2360) {
      break;
    }
  }
  EXPECT_GE(best->median_us, 2000);
  EXPECT_GE(best_added_us, 1800) << "the delay was not applied in full";
  EXPECT_LE(best_added_us, 2200)
      << "fio's median latency less the undelayed disk's, best of " << kAttempts
      << " (delayed median " << best->median_us << " us)";
  EXPECT_LT(best->mean_us, 3000) << "fio's mean latency (a delay twice?)";
  EXPECT_GE(best_p50, 2000u);
  EXPECT_LE(best_p50, 2360u)
      << "the stats' median latency, best of " << kAttempts;
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["engine_inflight_max"], 1u);
}

TEST_P(DelayTest, EngineCapHalvesIopsOnASlowDevice) {
  PVDISK_REQUIRE_FIO();
  const std::string& frontend = GetParam();
  TempDir dir;
  // Two images: each mount takes its image's lock.
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string other = dir.MakeDir("other") + "/disk0.img";
  CreateImage(other, 64 * kMiB);
  // 50 ms per request: 256 in flight make 5120 IOPS at most, far below
  // what the CPU can carry even on a loaded machine, so the delay alone
  // sets the pace and the cap's 128 in flight make half of it.
  std::vector<std::string> base = {"--disk",      image + ",delay=50000",
                                   "--engine",    "null",
                                   "--frontend",  frontend,
                                   "--queues",    "1",
                                   "--ring-size", "1024"};
  std::vector<std::string> deep = UringFuseWhereTested();
  base.insert(base.end(), deep.begin(), deep.end());
  std::vector<std::string> capped_args = base;
  capped_args[1] = other + ",delay=50000";
  capped_args.insert(capped_args.end(), {"--engine-max-inflight", "128"});
  Mount uncapped(dir.MakeDir("uncapped"), base);
  ASSERT_TRUE(uncapped.ok()) << uncapped.mount_result().Describe();
  Mount capped(dir.MakeDir("capped"), capped_args);
  ASSERT_TRUE(capped.ok()) << capped.mount_result().Describe();

  // 2 s: 40 rounds of 50 ms in each run; a round lost at either end moves
  // the ratio by a few percent, well inside the bounds below.
  const std::vector<std::string> job = {"--rw=randread", "--bs=4k",
                                        "--iodepth=256", "--runtime=2",
                                        "--time_based"};
  // Exactly half in theory; the uncapped run, with twice the requests to
  // carry, is the one that loses to a busy CPU, so 10% is allowed for it.
  // From below: no request finishes in less than 50 ms, so the uncapped
  // run makes at most 256 / 50 ms = 5120 IOPS, and a ratio under 0.35
  // means the capped run made less than 1792 IOPS, 70% of the 2560 its 128
  // engine slots allow: a cap that holds back more than it should (at 50
  // ms a request, a few ms of timer and scheduling lag under load cost
  // about 10%, far from 30%).
  constexpr double kLowest = 0.35;
  constexpr double kHighest = 0.55;
  std::vector<double> ratios;
  bool in_range = false;
  for (int attempt = 0; attempt < kAttempts && !in_range; ++attempt) {
    ResetStats(uncapped.mountpoint());
    ResetStats(capped.mountpoint());
    std::optional<FioReads> full = RunFio(uncapped.Path("disk0.img"), job);
    std::optional<FioReads> half = RunFio(capped.Path("disk0.img"), job);
    ASSERT_TRUE(full.has_value() && half.has_value());
    ASSERT_GT(full->iops, 0);
    const double ratio = half->iops / full->iops;
    ratios.push_back(ratio);
    in_range = ratio >= kLowest && ratio <= kHighest;
    EXPECT_GE(full->min_us, 50000);
    EXPECT_GE(half->min_us, 50000);
  }
  std::string seen;
  for (double ratio : ratios) {
    seen += ' ';
    seen += std::to_string(ratio);
  }
  EXPECT_TRUE(in_range) << "capped / uncapped IOPS outside [" << kLowest << ", "
                        << kHighest << "] in all " << ratios.size()
                        << " attempts:" << seen;

  // The counters say why: the uncapped engine held all 256 requests at
  // once; the capped one never more than 128, while the ring held the rest.
  DiskStats full_stats = StatsOf(uncapped.mountpoint(), "disk0.img");
  DiskStats half_stats = StatsOf(capped.mountpoint(), "disk0.img");
  if (!deep.empty()) {
    // "CPUSxDEPTH": FUSE's queues follow the ring under a delay.
    EXPECT_TRUE(full_stats.config["fuse_queues"].ends_with("x1024"))
        << full_stats.config["fuse_queues"];
  }
  EXPECT_EQ(full_stats["engine_inflight_max"], 256u);
  EXPECT_EQ(half_stats["engine_inflight_max"], 128u);
  EXPECT_GT(half_stats["inflight_max"], 128u);
  EXPECT_EQ(full_stats["errors"], 0u);
  EXPECT_EQ(half_stats["errors"], 0u);
}

TEST_P(DelayTest, VerifiedWritesThroughADelayOnARealEngine) {
  PVDISK_REQUIRE_FIO();
  const std::string& frontend = GetParam();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  // Writes due after reads queued later: completions leave out of order.
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image + ",delay=1000,delay-write=3000", "--engine",
               "sync", "--frontend", frontend});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  CommandResult fio = RunCommand(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randwrite", "--bsrange=4k-256k", "--iodepth=32",
                  "--size=16M", "--verify=crc32c", "--do_verify=1"}),
      std::chrono::seconds(180));
  ExpectFioClean(fio);
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["delay_us"], "1000");
  EXPECT_EQ(stats.config["delay_write_us"], "3000");
  EXPECT_GT(stats["reqs_write"], 0u);
  EXPECT_GT(stats["reqs_read"], 0u);
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  // Writes wait 3 ms from submission, so no write's latency is below it.
  EXPECT_GE(stats["lat_us_p50"], 1000u);
}

TEST_P(DelayTest, UnmountWithCompletionsHeldFinishesThem) {
  PVDISK_REQUIRE_FIO();
  const std::string& frontend = GetParam();
  TempDir dir;
  const uint64_t size = 16 * kMiB;
  const std::string image = dir.Path("disk0.img");
  FillFile(image, size, 0xAA);
  // Half a second per write: at any moment most of fio's writes are held.
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image + ",delay=500000", "--engine", "uring",
               "--frontend", frontend});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const pid_t daemon = mount.daemon_pid();
  ASSERT_GT(daemon, 0);
  BackgroundProcess fio(
      FioCommand(mount.Path("disk0.img"),
                 {"--rw=randwrite", "--bs=64k", "--iodepth=16", "--size=16M",
                  "--time_based", "--runtime=30", "--buffer_pattern=0x55"}));
  ASSERT_TRUE(fio.started());
  // Until requests are held at the engine (or fio ended early: a failure).
  EXPECT_TRUE(WaitUntil(
      [&] {
        return StatsOf(mount.mountpoint(), "disk0.img")["inflight"] > 0 &&
               StatsOf(mount.mountpoint(), "disk0.img")["reqs_write"] > 16;
      },
      std::chrono::seconds(20)));
  ASSERT_FALSE(fio.Wait(std::chrono::milliseconds(0)))
      << "fio ended before the unmount: " << fio.result().Describe();

  CommandResult unmounted = mount.Unmount(std::chrono::seconds(30));
  EXPECT_FALSE(unmounted.timed_out);
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  EXPECT_FALSE(IsMounted(mount.mountpoint()));
  EXPECT_FALSE(PvdiskProcessAlive(daemon)) << "daemon " << daemon;
  EXPECT_TRUE(fio.Wait(std::chrono::seconds(30)))
      << "fio still runs 30 s after the unmount";

  // Every write the daemon took finished whole before it exited: each
  // 4 KiB block is all old or all new, and some are new.
  std::string in_image = ReadWholeFile(image);
  ASSERT_EQ(in_image.size(), size);
  BlockCensus blocks = CountBlocks(in_image, '\xAA', '\x55');
  EXPECT_EQ(blocks.torn, 0u) << "first torn block: " << blocks.first_torn;
  EXPECT_GT(blocks.new_blocks, 0u) << "no held write reached the image";
}

// The inline placement: the FUSE queue threads drive the disk, and the
// delay's due times are timeouts on their rings. Over the uring engine
// (which borrows the same ring) and the sync engine (which does not), held
// writes and reads verify; no request completes before its delay; nothing
// stays held.
class InlineDelayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(InlineDelayTest, HeldCompletionsVerifyAndNeverComeEarly) {
  PVDISK_REQUIRE_FUSE_URING();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  // Writes due after reads queued later: completions leave out of order.
  Mount mount(dir.MakeDir("mnt"),
              {"--disk", image + ",delay=1000,delay-write=3000", "--engine",
               GetParam(), "--fuse-io", "uring", "--placement", "inline"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_EQ(stats.config["placement"], "inline");
  EXPECT_EQ(stats.config["delay_us"], "1000");
  EXPECT_EQ(stats.config["delay_write_us"], "3000");
  // Two jobs, each on its own 8 MiB, from whichever CPUs they run on.
  ExpectFioClean(
      RunCommand(FioCommand(mount.Path("disk0.img"),
                            {"--rw=randrw", "--bsrange=4k-128k", "--iodepth=16",
                             "--verify=crc32c", "--do_verify=1", "--numjobs=2",
                             "--size=8M", "--offset_increment=8M"}),
                 std::chrono::seconds(180)));

  // Reads alone: fio sees none complete within the read delay.
  std::optional<FioReads> reads = RunFio(
      mount.Path("disk0.img"), {"--rw=randread", "--bs=4k", "--iodepth=8",
                                "--runtime=1", "--time_based"});
  ASSERT_TRUE(reads.has_value());
  EXPECT_GE(reads->min_us, 1000) << "a completion came before its delay";
  stats = StatsOf(mount.mountpoint(), "disk0.img");
  EXPECT_GT(stats["reqs_write"], 0u);
  EXPECT_GT(stats["reqs_read"], 0u);
  EXPECT_EQ(stats["errors"], 0u);
  EXPECT_EQ(stats["inflight"], 0u);
  EXPECT_GE(stats["lat_us_p50"], 1000u);
}

INSTANTIATE_TEST_SUITE_P(Engines, InlineDelayTest,
                         ::testing::Values("uring", "sync"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Frontends, DelayTest,
                         ::testing::ValuesIn(AllFrontends()),
                         [](const auto& info) {
                           return FrontendTestName(info.param);
                         });
INSTANTIATE_TEST_SUITE_P(Nvme, DelayTest, ::testing::Values("nvme"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pvdisk::fuse_testing
