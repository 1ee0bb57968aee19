// Bad command lines: each exits 2 with one "pvdisk: ..." line on stderr and
// leaves nothing mounted, created or running.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Every path below `root` with its size (directories as -1).
std::set<std::pair<std::string, int64_t>> Tree(const std::string& root) {
  std::set<std::pair<std::string, int64_t>> entries;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(root, error);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    bool is_dir = it->is_directory(error);
    entries.insert({it->path().string(),
                    is_dir ? -1 : static_cast<int64_t>(it->file_size(error))});
  }
  return entries;
}

struct BadCase {
  const char* name;
  std::vector<std::string> args;  // "@" stands for the scratch directory
  // If set, the message must name this (the flag at fault).
  const char* names = nullptr;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

// `pvdisk mount @/mnt --disk @/disk0.img` followed by `flags`.
std::vector<std::string> MountWith(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"mount", "@/mnt", "--disk", "@/disk0.img"};
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

const std::vector<BadCase>& BadCases() {
  static const std::vector<BadCase> cases = {
      {"MissingImage", {"mount", "@/mnt", "--disk", "@/missing.img"}},
      {"ImageIsADirectory", {"mount", "@/mnt", "--disk", "@/dir.img"}},
      {"ImageSizeNotSectorMultiple", {"mount", "@/mnt", "--disk", "@/odd.img"}},
      {"EmptyImage", {"mount", "@/mnt", "--disk", "@/empty.img"}},
      {"UnknownFlag", {"mount", "@/mnt", "--disk", "@/disk0.img", "--bogus"}},
      {"UnknownEngine",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--engine", "foo"}},
      {"RingSizeNotPowerOfTwo",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--ring-size", "100"},
       "--ring-size"},
      {"RingSizeTooSmall",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--ring-size", "16"},
       "--ring-size"},
      {"RingSizeTooLarge",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--ring-size", "8192"},
       "--ring-size"},
      {"RingSizeNotANumber",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--ring-size", "abc"},
       "--ring-size"},
      {"RingSizeMissingValue",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--ring-size"},
       "--ring-size"},
      // The transport options.
      {"QueuesZero", MountWith({"--queues", "0"}), "--queues"},
      {"QueuesTooMany", MountWith({"--queues", "65"}), "--queues"},
      {"QueuesNotANumber", MountWith({"--queues", "abc"}), "--queues"},
      {"BackendThreadsZero", MountWith({"--backend-threads", "0"}),
       "--backend-threads"},
      {"BackendThreadsMoreThanDefaultQueues",
       MountWith({"--backend-threads", "3"}), "--backend-threads"},
      {"BackendThreadsMoreThanQueues",
       MountWith({"--queues", "4", "--backend-threads", "5"}),
       "--backend-threads"},
      {"BackendThreadsMoreThanQueuesGivenAfter",
       MountWith({"--backend-threads", "2", "--queues", "1"}),
       "--backend-threads"},
      {"MaxSegmentsTooFew", MountWith({"--max-segments", "10"}),
       "--max-segments"},
      {"MaxSegmentsTooMany", MountWith({"--max-segments", "4097"}),
       "--max-segments"},
      {"RingSize8192Blkif",
       MountWith({"--frontend", "blkif", "--ring-size", "8192"}),
       "--ring-size"},
      {"RingSize65536Virtio",
       MountWith({"--frontend", "virtio", "--ring-size", "65536"}),
       "--ring-size"},
      {"RingSizeNotPowerOfTwoVirtio",
       MountWith({"--frontend", "virtio", "--ring-size", "1000"}),
       "--ring-size"},
      {"UnknownFrontend", MountWith({"--frontend", "foo"}), "--frontend"},
      {"PersistentMaybe", MountWith({"--persistent", "maybe"}), "--persistent"},
      {"NotifySometimes", MountWith({"--notify", "sometimes"}), "--notify"},
      {"IrqSometimes", MountWith({"--irq", "sometimes"}), "--irq"},
      {"UnknownQueueMap", MountWith({"--queue-map", "bogus"}), "--queue-map"},
      {"PollUsNegative", MountWith({"--poll-us", "-1"}), "--poll-us"},
      {"FuseQueuePinMaybe", MountWith({"--fuse-queue-pin", "maybe"}),
       "--fuse-queue-pin"},
      {"FuseQueuePinWithClassic",
       MountWith({"--fuse-io", "classic", "--fuse-queue-pin", "off"}),
       "--fuse-queue-pin"},
      {"FuseHugeEntriesPastTheDepth",
       MountWith({"--fuse-queue-depth", "8", "--fuse-huge-entries", "9"}),
       "--fuse-huge-entries"},
      {"FuseHugeEntriesWithClassic",
       MountWith({"--fuse-io", "classic", "--fuse-huge-entries", "4"}),
       "--fuse-huge-entries"},
      {"FuseHugeEntriesWithoutPersistentGrants",
       MountWith({"--persistent", "off", "--fuse-huge-entries", "4"}),
       "--fuse-huge-entries"},
      {"FuseSpreadNeitherOnNorOff", MountWith({"--fuse-spread", "yes"}),
       "--fuse-spread"},
      {"NvmeDataWithoutNvme", MountWith({"--nvme-data", "sgl"}), "--nvme-data"},
      {"NvmeDataNeitherPrpNorSgl",
       MountWith({"--frontend", "nvme", "--nvme-data", "list"}), "--nvme-data"},
      {"IrqCoalesceWithoutNvme", MountWith({"--irq-coalesce", "8,100"}),
       "--irq-coalesce"},
      {"IrqCoalesceOutOfRange",
       MountWith({"--frontend", "nvme", "--irq-coalesce", "257,100"}),
       "--irq-coalesce"},
      {"IrqCoalesceWithoutTime",
       MountWith({"--frontend", "nvme", "--irq-coalesce", "8"}),
       "--irq-coalesce"},
      {"FuseSpreadWithClassic",
       MountWith({"--fuse-io", "classic", "--fuse-spread", "on"}),
       "--fuse-spread"},
      {"FuseSpreadWithBackendThreads",
       MountWith({"--placement", "backend-thread", "--fuse-spread", "on"}),
       "--fuse-spread"},
      {"FuseThreadsZero", MountWith({"--fuse-threads", "0"}), "--fuse-threads"},
      {"FuseThreadsTooMany", MountWith({"--fuse-threads", "65"}),
       "--fuse-threads"},
      {"EngineMaxInflightZero", MountWith({"--engine-max-inflight", "0"}),
       "--engine-max-inflight"},
      {"QueuesGivenTwice", MountWith({"--queues", "2", "--queues", "4"}),
       "--queues"},
      {"MountpointMissing", {"mount", "@/nope", "--disk", "@/disk0.img"}},
      {"MountpointIsARegularFile",
       {"mount", "@/odd.img", "--disk", "@/disk0.img"}},
      {"SameImageTwice",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--disk", "@/disk0.img"}},
      {"SameImageTwiceByAnotherPath",
       {"mount", "@/mnt", "--disk", "@/disk0.img", "--disk",
        "@/dir.img/../disk0.img"}},
      {"NoDisk", {"mount", "@/mnt"}},
      {"NoMountpoint", {"mount", "--disk", "@/disk0.img"}},
      {"UnknownDiskOption", {"mount", "@/mnt", "--disk", "@/disk0.img,rw"}},
      {"DiskSizeMismatch", {"mount", "@/mnt", "--disk", "@/disk0.img,size=2M"}},
      {"EioRangeOutsideImage",
       {"mount", "@/mnt", "--disk", "@/disk0.img,eio=4096+8"}},
      {"EioNotANumber", {"mount", "@/mnt", "--disk", "@/disk0.img,eio=x"}},
      {"DelayNotANumber",
       {"mount", "@/mnt", "--disk", "@/disk0.img,delay=2ms", "--engine",
        "null"},
       "delay takes microseconds"},
      {"DelayTooLong",
       {"mount", "@/mnt", "--disk", "@/disk0.img,delay=10000001"},
       "from 0 to 10000000"},
      {"DelayWriteNegative",
       {"mount", "@/mnt", "--disk", "@/disk0.img,delay=5,delay-write=-5"},
       "delay-write takes microseconds"},
      {"ImageNamedStats", {"mount", "@/mnt", "--disk", "@/stats"}},
      {"Qcow2BadVersion",
       {"mount", "@/mnt", "--disk", "@/bad.qcow2"},
       "version 7"},
      {"FormatQcow2OnARawImage",
       {"mount", "@/mnt", "--disk", "@/disk0.img,format=qcow2"},
       "not a qcow2 image"},
      {"FormatUnknown",
       {"mount", "@/mnt", "--disk", "@/disk0.img,format=vmdk"},
       "format takes raw or qcow2"},
      {"CacheUnknown",
       {"mount", "@/mnt", "--disk", "@/disk0.img,cache=lazy"},
       "cache takes volatile or writethrough"},
      {"CacheSizeTooSmall",
       {"mount", "@/mnt", "--disk", "@/disk0.img,cache=volatile,cache_size=4K"},
       "cache_size takes a size from 1M to 64G"},
      {"CacheVolatileOnTheNullEngine",
       {"mount", "@/mnt", "--disk", "@/disk0.img,cache=volatile", "--engine",
        "null"},
       "cache=volatile needs an engine that writes the image"},
      {"PowercutNotAMount", {"powercut", "@/mnt"}},
      {"PowercutUnknownKeep",
       {"powercut", "@/mnt", "--keep", "some"},
       "--keep must be none, all or random"},
      {"PowercutSeedWithoutRandom",
       {"powercut", "@/mnt", "--seed", "3"},
       "--seed applies to --keep random only"},
      {"LogWithoutAFile",
       {"mount", "@/mnt", "--disk", "@/disk0.img,log="},
       "log takes the file"},
      {"LogInAMissingDirectory",
       {"mount", "@/mnt", "--disk", "@/disk0.img,log=@/nope/disk0.log"},
       "cannot write the log"},
      {"LogIsTheImage",
       {"mount", "@/mnt", "--disk", "@/disk0.img,log=@/disk0.img"},
       "the log is an image or another disk's log"},
      {"MarkNotAMount", {"mark", "@/mnt", "first"}},
      {"ReplayWithoutATarget",
       {"replay", "@/disk0.img", "@/disk0.img"},
       "takes one of --to ENTRY"},
      {"ReplayOfNoLog",
       {"replay", "@/disk0.img", "--list"},
       "is not a whole dm-log-writes log"},
      {"CreateUnknownUnit", {"create", "@/new.img", "--size", "12Q"}},
      {"CreateSizeZero", {"create", "@/new.img", "--size", "0"}},
      {"CreateSizeNotSectorMultiple",
       {"create", "@/new.img", "--size", "1000"}},
      {"CreateWithoutSize", {"create", "@/new.img"}},
      {"CreateInMissingDirectory",
       {"create", "@/nope/new.img", "--size", "1M"}},
      {"UnmountNotMounted", {"unmount", "@/mnt"}},
      {"UnmountMissingDirectory", {"unmount", "@/nope"}},
      {"UnknownCommand", {"frobnicate", "@/mnt"}},
  };
  return cases;
}

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, ExitsTwoWithOneLineAndChangesNothing) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string mnt = dir.MakeDir("mnt");
  dir.MakeDir("dir.img");
  CreateImage(dir.Path("disk0.img"), 1 * kMiB);
  CreateImage(dir.Path("stats"), 1 * kMiB);
  WriteWholeFile(dir.Path("odd.img"), std::string(1000, 'o'));
  WriteWholeFile(dir.Path("empty.img"), "");
  // The qcow2 magic, then version 7.
  WriteWholeFile(dir.Path("bad.qcow2"),
                 std::string("QFI\xfb\0\0\0\x07", 8) + std::string(504, '\0'));
  const auto before = Tree(dir.path());

  std::vector<std::string> args;
  for (std::string arg : GetParam().args) {
    for (size_t at; (at = arg.find('@')) != std::string::npos;) {
      arg.replace(at, 1, dir.path());
    }
    args.push_back(arg);
  }
  CommandResult result = RunPvdisk(args, std::chrono::seconds(30));
  ExpectUsageError(result);
  if (GetParam().names != nullptr) {
    EXPECT_NE(result.err.find(GetParam().names), std::string::npos)
        << "the message does not name " << GetParam().names << ": "
        << result.Describe();
  }

  EXPECT_FALSE(IsMounted(mnt));
  EXPECT_EQ(MountCount(dir.path() + "/nope"), 0);
  EXPECT_EQ(Tree(dir.path()), before) << "files changed";
  EXPECT_TRUE(PvdiskProcessesMentioning(dir.path()).empty());
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInputTest, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) {
                           return std::string(info.param.name);
                         });

TEST(CliTest, SecondMountOnTheSameDirectoryIsRefused) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("disk0.img"), 8 * kMiB);
  CreateImage(dir.Path("other.img"), 8 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("disk0.img")});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();

  for (const std::string& image :
       {dir.Path("other.img"), dir.Path("disk0.img")}) {
    CommandResult second =
        RunPvdisk({"mount", mount.mountpoint(), "--disk", image},
                  std::chrono::seconds(30));
    ExpectUsageError(second);
    EXPECT_EQ(MountCount(mount.mountpoint()), 1);
    EXPECT_EQ(PvdiskProcessesMentioning(dir.path()).size(), 1u);
  }

  // The first mount still serves.
  Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  const std::string data = PatternBytes(71, 5000);
  PwriteAll(fd.get(), 12345, data);
  EXPECT_EQ(FirstDifference(data, PreadAll(fd.get(), 12345, data.size())), "");
  ASSERT_EQ(fd.Close(), 0);
  EXPECT_GT(StatsOf(mount.mountpoint(), "disk0.img")["fuse_writes"], 0u);
  EXPECT_EQ(DaemonPidOf(mount.mountpoint()), mount.daemon_pid());
}

// The data-path tests run once per frontend of AllFrontends(), nvme in the
// representative ones (OfferedFrontends()); a frontend the help offers but
// the suite does not cover fails here.
TEST(CliTest, HelpListsTheFrontendsTheSuiteCovers) {
  CommandResult help = RunPvdisk({"mount", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.Describe();
  const std::string prefix = "\n  --frontend ";
  size_t at = help.out.find(prefix);
  ASSERT_NE(at, std::string::npos) << help.out;
  at += prefix.size();
  std::string choices = help.out.substr(at, help.out.find(' ', at) - at);
  std::vector<std::string> frontends;
  for (size_t start = 0; start <= choices.size();) {
    size_t bar = std::min(choices.find('|', start), choices.size());
    frontends.push_back(choices.substr(start, bar - start));
    start = bar + 1;
  }
  EXPECT_EQ(frontends, OfferedFrontends()) << help.out;
  EXPECT_EQ(MountFlagDefault("frontend"), AllFrontends()[0]);
}

TEST(CliTest, CreateRefusesAnExistingFileUnlessForced) {
  TempDir dir;
  const std::string path = dir.Path("disk0.img");
  const std::string precious = PatternBytes(81, 8192);
  WriteWholeFile(path, precious);

  CommandResult refused = RunPvdisk({"create", path, "--size", "1M"});
  ExpectUsageError(refused);
  EXPECT_EQ(ReadWholeFile(path), precious) << "the file changed";

  CommandResult forced = RunPvdisk({"create", path, "--size", "1M", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.Describe();
  EXPECT_EQ(forced.err, "");
  EXPECT_EQ(ReadWholeFile(path), std::string(kMiB, '\0'));

  // A fresh create works and makes a sparse image of exactly that size.
  CommandResult fresh =
      RunPvdisk({"create", dir.Path("new.img"), "--size", "3M"});
  EXPECT_EQ(fresh.exit_code, 0) << fresh.Describe();
  struct stat st;
  ASSERT_EQ(stat(dir.Path("new.img").c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 3 * kMiB);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 3 * kMiB)
      << "not sparse";
}

}  // namespace
}  // namespace pvdisk::fuse_testing
