// The write log (`--disk IMG,log=FILE`), marks and `pvdisk replay`, judged
// by ext4's own checker: ext4 made on a copy of the image, mounted through
// a loop device over the disk file, gets files written and synced, with a
// mark after each (the file system frozen, so that the disk holds still);
// replaying the log onto copies of the image as it was at mount gives, at
// every flush, an image e2fsck -fn finds clean, and at each mark, the disk
// as it was read at that mark, byte for byte. With cache=volatile on the
// same disk the log still records every write a flush covered. Bad input:
// a log that cannot be written (nothing mounted), a mount that fails after
// its log was made (the file at log= untouched, none made), a replay past
// the log's end and a log that is not whole (one line, exit 2, the image
// unchanged). QEMU's blklogwrites appends to a pvdisk log, and pvdisk replays
// that. The ext4 test and the one beside a volatile cache run with backend
// threads and in a backend process (--backend process, which writes the
// log there); the death of that process ends the log at its last flush or
// mark, every entry before whole. Needs root, mount, fsfreeze, mkfs.ext4
// and e2fsck.
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string MissingTools() {
  if (geteuid() != 0) return "needs root (mount -o loop)";
  for (const char* tool : {"mkfs.ext4", "e2fsck", "fsfreeze", "cmp"}) {
    if (RunCommand({"sh", "-c", std::string("command -v ") + tool}).exit_code !=
        0) {
      return std::string(tool) + " not found";
    }
  }
  return "";
}

// A 4 MiB image in `dir`, a copy of it as it was before any write (`base`,
// what a replay starts from), and the path for its log. All empty if the
// copy failed (and the test has failed).
struct ImageAndLog {
  std::string image, base, log;
};
ImageAndLog LoggedImage(const TempDir& dir) {
  ImageAndLog paths{dir.path() + "/disk0.img", dir.path() + "/base.img",
                    dir.path() + "/disk0.log"};
  CreateImage(paths.image, 4 * kMiB);
  const int copied = RunCommand({"cp", paths.image, paths.base}).exit_code;
  EXPECT_EQ(copied, 0);
  return copied == 0 ? paths : ImageAndLog{};
}

// An ext4 file system mounted at `dir` through an auto-cleared loop device
// over `file`; unmounted (and the loop device freed) on destruction.
class LoopMount {
 public:
  LoopMount(const std::string& file, const std::string& dir) : dir_(dir) {
    result_ = RunCommand({"mount", "-t", "ext4", "-o", "loop", file, dir});
    mounted_ = result_.exit_code == 0;
  }
  ~LoopMount() { Unmount(); }
  LoopMount(const LoopMount&) = delete;
  LoopMount& operator=(const LoopMount&) = delete;
  bool ok() const { return mounted_; }
  const CommandResult& result() const { return result_; }
  int Unmount() {
    if (!mounted_) return 0;
    mounted_ = false;
    RunCommand({"fsfreeze", "-u", dir_});  // in case a check failed frozen
    return RunCommand({"umount", dir_}).exit_code;
  }

 private:
  std::string dir_;
  CommandResult result_;
  bool mounted_ = false;
};

// The number of flushes and the marks `pvdisk replay LOG --list` shows.
struct Listing {
  int flushes = 0;
  std::vector<std::string> marks;
};
Listing ListLog(const std::string& log) {
  Listing listing;
  CommandResult list = RunPvdisk({"replay", log, "--list"});
  EXPECT_EQ(list.exit_code, 0) << list.Describe();
  size_t at = 0;
  while ((at = list.out.find("flush ", at)) != std::string::npos) {
    ++listing.flushes;
    at += 6;
  }
  at = 0;
  while ((at = list.out.find(" mark ", at)) != std::string::npos) {
    const size_t end = list.out.find('\n', at);
    listing.marks.push_back(list.out.substr(at + 6, end - at - 6));
    at = end;
  }
  return listing;
}

// Replays `log` onto a fresh copy of `base` up to `target` (e.g.
// {"--to-flush", "3"}) and returns the copy's path.
std::string ReplayCopy(const TempDir& dir, const std::string& base,
                       const std::string& log,
                       const std::vector<std::string>& target) {
  const std::string copy = dir.path() + "/replayed.img";
  CommandResult cp = RunCommand({"cp", "--sparse=always", base, copy});
  EXPECT_EQ(cp.exit_code, 0) << cp.Describe();
  std::vector<std::string> args = {"replay", log, copy};
  args.insert(args.end(), target.begin(), target.end());
  CommandResult replay = RunPvdisk(args);
  EXPECT_EQ(replay.exit_code, 0) << replay.Describe();
  return copy;
}

// Where the disk's backend runs: "thread" (--placement backend-thread) or
// "process" (--backend process).
std::vector<std::string> BackendArgs(const std::string& backend) {
  if (backend == "process") return {"--backend", "process"};
  return {"--placement", "backend-thread"};
}

std::vector<std::string> Joined(std::vector<std::string> args,
                                const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

class WriteLogExt4Test : public ::testing::TestWithParam<std::string> {};

TEST_P(WriteLogExt4Test, ReplayToEveryFlushIsCleanAndToAMarkIsTheDiskThen) {
  PVDISK_REQUIRE_FUSE();
  if (std::string why = MissingTools(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string image = dir.path() + "/disk0.img";
  const std::string base = dir.path() + "/base.img";
  const std::string log = dir.path() + "/disk0.log";
  CreateImage(image, 16 * kMiB);
  CommandResult mkfs = RunCommand({"mkfs.ext4", "-q", "-F", image});
  ASSERT_EQ(mkfs.exit_code, 0) << mkfs.Describe();
  // The state the log starts from: the image at mount.
  ASSERT_EQ(RunCommand({"cp", "--sparse=always", image, base}).exit_code, 0);
  const std::string fs_dir = dir.MakeDir("fs");
  std::vector<std::string> snapshots;
  {
    Mount mount(dir.MakeDir("mnt"), Joined({"--disk", image + ",log=" + log},
                                           BackendArgs(GetParam())));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    LoopMount fs(mount.Path("disk0.img"), fs_dir);
    ASSERT_TRUE(fs.ok()) << fs.result().Describe();
    for (int i = 0; i < 3; ++i) {
      const std::string name = fs_dir + "/file" + std::to_string(i);
      WriteWholeFile(name, PatternBytes(i + 1, 100 * 1024 + i * 4096));
      ASSERT_EQ(RunCommand({"mv", name, name + ".done"}).exit_code, 0);
      ASSERT_EQ(RunCommand({"sync", "-f", fs_dir}).exit_code, 0);
      // Frozen, the file system writes nothing: the disk read now is the
      // disk at the mark.
      ASSERT_EQ(RunCommand({"fsfreeze", "-f", fs_dir}).exit_code, 0);
      const std::string mark = "file" + std::to_string(i);
      CommandResult marked = RunPvdisk({"mark", mount.mountpoint(), mark});
      ASSERT_EQ(marked.exit_code, 0) << marked.Describe();
      const std::string snapshot = dir.path() + "/at-" + mark + ".img";
      CommandResult dd =
          RunCommand({"dd", "if=" + mount.Path("disk0.img"), "of=" + snapshot,
                      "bs=1M", "iflag=direct", "status=none"});
      ASSERT_EQ(dd.exit_code, 0) << dd.Describe();
      snapshots.push_back(snapshot);
      ASSERT_EQ(RunCommand({"fsfreeze", "-u", fs_dir}).exit_code, 0);
    }
    ASSERT_EQ(fs.Unmount(), 0);
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_GT(stats["log_entries"], 0u);
    EXPECT_GT(stats["log_bytes"], 0u);
    ASSERT_EQ(mount.Unmount().exit_code, 0);
  }
  const Listing listing = ListLog(log);
  RecordProperty("flushes_replayed", listing.flushes);
  EXPECT_GE(listing.flushes, 3);
  EXPECT_EQ(listing.marks, (std::vector<std::string>{"file0", "file1", "file2",
                                                     "dm-log-writes-end"}));
  for (int n = 1; n <= listing.flushes; ++n) {
    const std::string copy =
        ReplayCopy(dir, base, log, {"--to-flush", std::to_string(n)});
    CommandResult fsck = RunCommand({"e2fsck", "-f", "-n", copy});
    EXPECT_EQ(fsck.exit_code, 0) << "at flush " << n << ": " << fsck.Describe();
  }
  for (int i = 0; i < 3; ++i) {
    const std::string copy =
        ReplayCopy(dir, base, log, {"--to-mark", "file" + std::to_string(i)});
    CommandResult cmp = RunCommand({"cmp", copy, snapshots[i]});
    EXPECT_EQ(cmp.exit_code, 0)
        << "at mark file" << i << ": " << cmp.Describe();
  }
  // The whole log gives the image as unmounted.
  const std::string copy =
      ReplayCopy(dir, base, log, {"--to-mark", "dm-log-writes-end"});
  CommandResult cmp = RunCommand({"cmp", copy, image});
  EXPECT_EQ(cmp.exit_code, 0) << cmp.Describe();
}

std::string BackendName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, WriteLogExt4Test,
                         ::testing::Values("thread", "process"), BackendName);

class WriteLogBesideACacheTest : public ::testing::TestWithParam<std::string> {
};

// With cache=volatile the log records what the guest did: the writes and
// the flush that covered them, marked through the stats file, and a
// discard.
TEST_P(WriteLogBesideACacheTest, WorksBesideAVolatileCache) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const auto [image, base, log] = LoggedImage(dir);
  ASSERT_FALSE(image.empty());
  const std::string data = PatternBytes(7, 256 * 1024);
  {
    Mount mount(dir.MakeDir("mnt"),
                Joined({"--disk", image + ",cache=volatile,log=" + log},
                       BackendArgs(GetParam())));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 1 * kMiB, data);
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    {
      Fd stats = Open(mount.Path("stats"), O_WRONLY);
      ASSERT_TRUE(stats.valid()) << std::strerror(errno);
      const std::string command = "mark synced\n";
      ASSERT_EQ(write(stats.get(), command.data(), command.size()),
                static_cast<ssize_t>(command.size()))
          << std::strerror(errno);
    }
    PwriteAll(fd.get(), 2 * kMiB, data);  // never synced before the mark
    // A discard of the synced data's first 64 KiB: logged, replayed as
    // zeros.
    ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        1 * kMiB, 64 * 1024),
              0)
        << std::strerror(errno);
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    ASSERT_EQ(mount.Unmount().exit_code, 0);
  }
  std::string copy = ReplayCopy(dir, base, log, {"--to-mark", "synced"});
  {
    Fd fd = Open(copy, O_RDONLY);
    ASSERT_TRUE(fd.valid());
    EXPECT_TRUE(PreadAll(fd.get(), 1 * kMiB, data.size()) == data);
    EXPECT_EQ(PreadAll(fd.get(), 2 * kMiB, data.size()),
              std::string(data.size(), '\0'));
  }
  copy = ReplayCopy(dir, base, log, {"--to-mark", "dm-log-writes-end"});
  Fd fd = Open(copy, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(PreadAll(fd.get(), 1 * kMiB, 64 * 1024),
            std::string(64 * 1024, '\0'));
  EXPECT_TRUE(PreadAll(fd.get(), 1 * kMiB + 64 * 1024,
                       data.size() - 64 * 1024) == data.substr(64 * 1024));
  EXPECT_TRUE(PreadAll(fd.get(), 2 * kMiB, data.size()) == data);
}

INSTANTIATE_TEST_SUITE_P(Backends, WriteLogBesideACacheTest,
                         ::testing::Values("thread", "process"), BackendName);

// kill -9 of the backend process that writes the log: the disk is not
// restarted (I/O fails with EIO), and the log ends at its last flush: its
// superblock counts every entry up to there, so that a replay gives the
// disk as flushed, and nothing after (no end mark: the power went).
TEST(WriteLogMountTest, ABackendDeathEndsTheLogAtItsLastFlush) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const auto [image, base, log] = LoggedImage(dir);
  ASSERT_FALSE(image.empty());
  const std::string one = PatternBytes(1, 128 * 1024);
  const std::string two = PatternBytes(2, 128 * 1024);
  const std::string three = PatternBytes(3, 128 * 1024);
  {
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image + ",log=" + log, "--backend", "process"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    PwriteAll(fd.get(), 1 * kMiB, one);
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    CommandResult marked = RunPvdisk({"mark", mount.mountpoint(), "one"});
    ASSERT_EQ(marked.exit_code, 0) << marked.Describe();
    PwriteAll(fd.get(), 2 * kMiB, two);
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    PwriteAll(fd.get(), 3 * kMiB, three);  // never flushed
    DiskStats stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_GE(stats["log_entries"], 6u);
    const pid_t pid =
        static_cast<pid_t>(std::stol(stats.config["backend_pid"]));
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0) << std::strerror(errno);
    ASSERT_TRUE(WaitUntil(
        [&] {
          return StatsOf(mount.mountpoint(), "disk0.img")
                     .config["backend_state"] == "failed";
        },
        std::chrono::seconds(30)));
    stats = StatsOf(mount.mountpoint(), "disk0.img");
    EXPECT_NE(stats.config["log_state"].find("ended"), std::string::npos)
        << stats.config["log_state"];
    {
      // Past the page cache: the disk itself answers.
      Fd direct = Open(mount.Path("disk0.img"), O_RDONLY | O_DIRECT);
      ASSERT_TRUE(direct.valid()) << std::strerror(errno);
      void* buffer = nullptr;
      ASSERT_EQ(posix_memalign(&buffer, 4096, 4096), 0);
      errno = 0;
      EXPECT_EQ(pread(direct.get(), buffer, 4096, 0), -1);
      EXPECT_EQ(errno, EIO);
      free(buffer);
    }
    CommandResult refused = RunPvdisk({"mark", mount.mountpoint(), "two"});
    EXPECT_NE(refused.exit_code, 0) << refused.Describe();
    fd.Close();
    ASSERT_EQ(mount.Unmount().exit_code, 0);
  }
  const Listing listing = ListLog(log);
  EXPECT_EQ(listing.marks, (std::vector<std::string>{"one"}));
  ASSERT_GE(listing.flushes, 2);
  const std::string copy = ReplayCopy(
      dir, base, log, {"--to-flush", std::to_string(listing.flushes)});
  Fd fd = Open(copy, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(PreadAll(fd.get(), 1 * kMiB, one.size()) == one);
  EXPECT_TRUE(PreadAll(fd.get(), 2 * kMiB, two.size()) == two);
  EXPECT_EQ(PreadAll(fd.get(), 3 * kMiB, three.size()),
            std::string(three.size(), '\0'));
}

// Another implementation as the judge of the layout: QEMU's blklogwrites
// driver, asked to append to pvdisk's log, walks its entries to find the
// end (refusing a log it cannot walk), and pvdisk replay reads what QEMU
// appended after pvdisk's entries.
TEST(WriteLogMountTest, QemuAppendsToThePvdiskLogAndReplayReadsIt) {
  PVDISK_REQUIRE_FUSE();
  if (RunCommand({"sh", "-c", "command -v qemu-io"}).exit_code != 0) {
    GTEST_SKIP() << "qemu-io not found";
  }
  TempDir dir;
  const auto [image, base, log] = LoggedImage(dir);
  ASSERT_FALSE(image.empty());
  const std::string data = PatternBytes(9, 192 * 1024);
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",log=" + log,
                                     "--placement", "backend-thread"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR | O_DIRECT);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    void* buffer = nullptr;
    ASSERT_EQ(posix_memalign(&buffer, 4096, data.size()), 0);
    std::memcpy(buffer, data.data(), data.size());
    EXPECT_EQ(pwrite(fd.get(), buffer, data.size(), 0),
              static_cast<ssize_t>(data.size()));
    free(buffer);
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    ASSERT_EQ(mount.Unmount().exit_code, 0);
  }
  CommandResult qemu = RunCommand(
      {"qemu-io", "-c", "write -P 0x5a 1M 8k", "-c", "flush",
       "json:{\"driver\":\"blklogwrites\",\"file\":{\"driver\":\"file\","
       "\"filename\":\"" +
           image + "\"},\"log\":{\"driver\":\"file\",\"filename\":\"" + log +
           "\"},\"log-append\":true}"});
  ASSERT_EQ(qemu.exit_code, 0) << qemu.Describe();
  const Listing listing = ListLog(log);
  ASSERT_EQ(listing.flushes, 2);
  const std::string copy = ReplayCopy(dir, base, log, {"--to-flush", "2"});
  Fd fd = Open(copy, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(PreadAll(fd.get(), 0, data.size()) == data);
  EXPECT_EQ(PreadAll(fd.get(), 1 * kMiB, 8192), std::string(8192, '\x5a'));
}

TEST(WriteLogBadInputTest, AnUnwritableLogMountsNothing) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.path() + "/disk0.img";
  CreateImage(image, 1 * kMiB);
  const std::string mnt = dir.MakeDir("mnt");
  CommandResult mount = RunPvdisk(
      {"mount", mnt, "--disk", image + ",log=" + dir.path() + "/no/such.log"});
  ExpectUsageError(mount);
  EXPECT_NE(mount.err.find("no/such.log"), std::string::npos) << mount.err;
  EXPECT_FALSE(IsMounted(mnt));
}

// The names in `folder`, sorted.
std::vector<std::string> FolderNames(const std::string& folder) {
  CommandResult ls = RunCommand({"ls", "-A", folder});
  EXPECT_EQ(ls.exit_code, 0) << ls.Describe();
  std::vector<std::string> names;
  size_t at = 0;
  while (at < ls.out.size()) {
    const size_t end = ls.out.find('\n', at);
    names.push_back(ls.out.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return names;
}

// A mount that fails after its log was made (its second disk's image is
// served by another mount) leaves the file at log= as it was, and makes
// none where there was none; a mount that serves replaces the file.
TEST(WriteLogBadInputTest, AFailedMountLeavesTheLogFileAloneAndMakesNone) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.path() + "/disk0.img";
  const std::string busy = dir.path() + "/busy.img";
  CreateImage(image, 1 * kMiB);
  CreateImage(busy, 1 * kMiB);
  const std::string old_log = dir.path() + "/old.log";
  const std::string new_log = dir.path() + "/new.log";
  WriteWholeFile(old_log, "an older log, or a file of the user's\n");
  const std::string mnt = dir.MakeDir("mnt");
  {
    Mount holder(dir.MakeDir("holder"), {"--disk", busy});
    const std::vector<std::string> before = FolderNames(dir.path());
    for (const std::string& log : {old_log, new_log}) {
      CommandResult mount = RunPvdisk(
          {"mount", mnt, "--disk", image + ",log=" + log, "--disk", busy});
      ExpectUsageError(mount);
      EXPECT_NE(mount.err.find("busy.img"), std::string::npos) << mount.err;
      EXPECT_FALSE(IsMounted(mnt));
      EXPECT_EQ(ReadWholeFile(old_log),
                "an older log, or a file of the user's\n");
      EXPECT_EQ(FolderNames(dir.path()), before) << log;
    }
    ASSERT_EQ(holder.Unmount().exit_code, 0);
  }
  {
    Mount mount(mnt, {"--disk", image + ",log=" + old_log});
    ASSERT_EQ(mount.Unmount().exit_code, 0);
  }
  CommandResult list = RunPvdisk({"replay", old_log, "--list"});
  EXPECT_EQ(list.exit_code, 0) << list.Describe();
  EXPECT_NE(list.out.find("dm-log-writes-end"), std::string::npos) << list.out;
}

TEST(WriteLogBadInputTest, ReplayRefusesBadTargetsAndLogsLeavingTheImage) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.path() + "/disk0.img";
  const std::string log = dir.path() + "/disk0.log";
  CreateImage(image, 1 * kMiB);
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",log=" + log,
                                     "--placement", "backend-thread"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDWR);
    ASSERT_TRUE(fd.valid());
    PwriteAll(fd.get(), 0, PatternBytes(3, 8192));
    ASSERT_EQ(fsync(fd.get()), 0);
    ASSERT_EQ(mount.Unmount().exit_code, 0);
  }
  const std::string target = dir.path() + "/target.img";
  CreateImage(target, 1 * kMiB);
  auto unchanged = [&] {
    Fd fd = Open(target, O_RDONLY);
    return PreadAll(fd.get(), 0, kMiB) == std::string(kMiB, '\0');
  };
  for (const std::vector<std::string>& to :
       {std::vector<std::string>{"--to", "1000"},
        std::vector<std::string>{"--to-flush", "99"},
        std::vector<std::string>{"--to-mark", "nope"}}) {
    std::vector<std::string> args = {"replay", log, target};
    args.insert(args.end(), to.begin(), to.end());
    CommandResult replay = RunPvdisk(args);
    ExpectUsageError(replay);
    EXPECT_TRUE(unchanged()) << to[0];
  }
  // A log cut short, and a file that is no log.
  const std::string cut = dir.path() + "/cut.log";
  ASSERT_EQ(RunCommand({"cp", log, cut}).exit_code, 0);
  ASSERT_EQ(truncate(cut.c_str(), 512 * 3), 0);
  CommandResult truncated = RunPvdisk({"replay", cut, target, "--to", "0"});
  ExpectUsageError(truncated);
  EXPECT_NE(truncated.err.find("truncated"), std::string::npos)
      << truncated.err;
  CommandResult junk = RunPvdisk({"replay", image, target, "--to", "0"});
  ExpectUsageError(junk);
  EXPECT_NE(junk.err.find("magic"), std::string::npos) << junk.err;
  EXPECT_TRUE(unchanged());
}

}  // namespace
}  // namespace pvdisk::fuse_testing
