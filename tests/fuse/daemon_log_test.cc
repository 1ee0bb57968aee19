// The daemon's log (pvdisk mount --log): a daemonized mount writes its
// events to the file the mount message names, one line each with the time,
// the disk, the queue and the cause; an I/O error storm makes a bounded
// number of lines and a count; `pvdisk list` shows each mount's log; bad
// --log values are refused before anything is mounted.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "backend_process_util.h"
#include "base/event_log.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "stats/json_reader.h"

namespace pvdisk::fuse_testing {
namespace {

using stats::JsonValue;
using stats::ParseJson;

constexpr uint64_t kMiB = 1 << 20;

std::vector<std::string> LinesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The lines of `log` whose event is `kind` ("disk=D queue=Q KIND: ...").
std::vector<std::string> EventLines(const std::string& log,
                                    const std::string& kind) {
  std::vector<std::string> out;
  for (const std::string& line : LinesOf(log)) {
    if (line.find(" " + kind + ": ") != std::string::npos) out.push_back(line);
  }
  return out;
}

// Every line of a log file starts with the UTC time and the writer's pid.
void ExpectTimedLines(const std::string& log) {
  const std::regex timed(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z pvdisk\[\d+\]: .+$)");
  for (const std::string& line : LinesOf(log)) {
    EXPECT_TRUE(std::regex_match(line, timed)) << line;
  }
}

// The log a mount of `pvdisk list --json` shows for `mountpoint`.
std::string ListedLog(const std::string& mountpoint) {
  CommandResult list = RunPvdisk({"list", "--json"});
  EXPECT_EQ(list.exit_code, 0) << list.Describe();
  std::string error;
  std::optional<JsonValue> root = ParseJson(list.out, &error);
  if (!root.has_value()) {
    ADD_FAILURE() << error << "\n" << list.out;
    return "";
  }
  for (const JsonValue& mount : root->Find("mounts")->array) {
    if (mount.Find("mountpoint")->string != mountpoint) continue;
    const JsonValue* log = mount.Find("log");
    return log == nullptr ? "" : log->string;
  }
  ADD_FAILURE() << mountpoint << " not listed: " << list.out;
  return "";
}

// An engine that fails as a whole (in the backend process, which logs
// through the daemon's log file, its inherited stderr) and a killed backend
// process (which the daemon logs): one line each, naming disk and queues.
TEST(DaemonLogTest, EngineFailureAndBackendKillMakeOneLineEach) {
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 64 * kMiB);
  const std::string log = dir.Path("pvdisk.log");
  {
    ScopedTestFault fault("fail=300");
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image, "--backend", "process", "--placement",
                 "backend-thread", "--queues", "2", "--log", log},
                std::chrono::seconds(150));
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    EXPECT_NE(mount.mount_result().out.find(", log " + log + ")"),
              std::string::npos)
        << mount.mount_result().out;

    CommandResult failing =
        RunCommand(FioCommand(mount.Path("disk0.img"),
                              {"--rw=randwrite", "--bs=4k", "--iodepth=32",
                               "--size=32M", "--numjobs=2"}),
                   std::chrono::seconds(60));
    ASSERT_FALSE(failing.timed_out) << failing.Describe();
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["engine_restarts"], 1u);
    ASSERT_TRUE(KillBackendAndWaitForNew(mount.mountpoint(), "disk0.img"));
    EXPECT_EQ(StatsOf(mount.mountpoint(), "disk0.img")["backend_restarts"], 1u);
    CommandResult unmounted = mount.Unmount();
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  const std::string text = ReadWholeFile(log);
  ExpectTimedLines(text);
  std::vector<std::string> engine = EventLines(text, "engine_restart");
  ASSERT_EQ(engine.size(), 1u) << text;
  // One backend thread serves both queues with one engine.
  EXPECT_NE(engine[0].find("disk=disk0.img queue=0,1 engine_restart: the I/O "
                           "engine failed as a whole"),
            std::string::npos)
      << engine[0];
  std::vector<std::string> backend = EventLines(text, "backend_restart");
  ASSERT_EQ(backend.size(), 1u) << text;
  EXPECT_NE(backend[0].find("disk=disk0.img queue=0,1 backend_restart: the "
                            "backend process of " +
                            image + " (pid "),
            std::string::npos)
      << backend[0];
  EXPECT_NE(backend[0].find(") was killed by signal 9"), std::string::npos)
      << backend[0];
  // The requests the failed engine held were answered with errors, which
  // are logged too.
  EXPECT_FALSE(EventLines(text, "io_error").empty()) << text;
}

// Every read of a failing sector is an I/O error: thousands of them make at
// most kEventBurst lines per window and one count, and the lines and the
// count add up to the errors counter.
TEST(DaemonLogTest, AnIoErrorStormIsRateLimitedAndCounted) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 16 * kMiB);
  const std::string log = dir.Path("pvdisk.log");
  uint64_t errors = 0;
  std::chrono::seconds took{0};
  {
    Mount mount(dir.MakeDir("mnt"),
                {"--disk", image + ",eio=0+8", "--queues", "1", "--log", log});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("disk0.img"), O_RDONLY | O_DIRECT);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    void* buffer = nullptr;
    ASSERT_EQ(posix_memalign(&buffer, 4096, 4096), 0);
    const auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < 10'000; ++i) {
      errno = 0;
      ASSERT_EQ(pread(fd.get(), buffer, 4096, 0), -1);
      ASSERT_EQ(errno, EIO);
    }
    took = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::steady_clock::now() - started);
    free(buffer);
    ASSERT_EQ(fd.Close(), 0);
    errors = StatsOf(mount.mountpoint(), "disk0.img")["errors"];
    EXPECT_GE(errors, 10'000u);
    CommandResult unmounted = mount.Unmount();
    EXPECT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  const std::string text = ReadWholeFile(log);
  ExpectTimedLines(text);
  int written = 0, count_lines = 0;
  uint64_t suppressed = 0;
  for (const std::string& line : EventLines(text, "io_error")) {
    const std::string subject = "disk=disk0.img queue=0 io_error: ";
    size_t at = line.find(subject);
    ASSERT_NE(at, std::string::npos) << line;
    std::string cause = line.substr(at + subject.size());
    if (cause.find(" more suppressed") != std::string::npos) {
      ++count_lines;
      suppressed += std::stoull(cause);
    } else {
      EXPECT_EQ(cause,
                "read of 8 sectors at sector 0 failed: Input/output "
                "error");
      ++written;
    }
  }
  const int windows = static_cast<int>(took.count() / kEventWindowSeconds) + 1;
  EXPECT_GE(written, 1);
  EXPECT_LE(written, static_cast<int>(kEventBurst) * windows) << text;
  EXPECT_GE(count_lines, 1) << text;
  EXPECT_LE(count_lines, windows) << text;
  EXPECT_EQ(written + suppressed, errors) << text;
}

// Without --log a daemon logs to a file of the runtime directory named
// after the mountpoint, which the message and `pvdisk list` name; the
// mount appends to it.
TEST(DaemonLogTest, TheDefaultLogIsInTheRuntimeDirectory) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 4 * kMiB);
  const std::string mountpoint = dir.MakeDir("mnt");
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  ASSERT_NE(runtime, nullptr) << "the harness sets XDG_RUNTIME_DIR";
  std::string name = mountpoint.substr(1);
  for (char& c : name) c = c == '/' ? '-' : c;
  const std::string log = std::string(runtime) + "/pvdisk/" + name + ".log";
  {
    Mount mount(mountpoint, {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    EXPECT_NE(mount.mount_result().out.find(", log " + log + ")"),
              std::string::npos)
        << mount.mount_result().out;
    EXPECT_EQ(ListedLog(mountpoint), log);
    CommandResult text = RunPvdisk({"list"});
    EXPECT_NE(text.out.find("  log: " + log + "\n"), std::string::npos)
        << text.out;
    EXPECT_EQ(mount.Unmount().exit_code, 0);
  }
  std::vector<std::string> lines = LinesOf(ReadWholeFile(log));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("serving 1 disk(s) at " + mountpoint),
            std::string::npos)
      << lines[0];
  ExpectTimedLines(ReadWholeFile(log));
  unlink(log.c_str());
}

// --log syslog is accepted and named. (Whether a line reaches syslog is not
// checked: that needs a syslog daemon, which the test machines lack.)
TEST(DaemonLogTest, SyslogIsAccepted) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 4 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", image, "--log", "syslog"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  EXPECT_NE(mount.mount_result().out.find(", log syslog)"), std::string::npos)
      << mount.mount_result().out;
  EXPECT_EQ(ListedLog(mount.mountpoint()), "syslog");
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

// A --log that cannot be written: one line naming it, exit 2, no mount, no
// daemon, no file made.
TEST(DaemonLogTest, BadLogValuesAreRefusedAndNothingIsMounted) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string image = dir.Path("disk0.img");
  CreateImage(image, 4 * kMiB);
  const std::string mountpoint = dir.MakeDir("mnt");
  WriteWholeFile(dir.Path("a-file"), "x");
  const std::string folder = dir.MakeDir("a-folder");
  struct Case {
    std::string value;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {dir.Path("a-file") + "/pvdisk.log", "Not a directory"},
           {dir.Path("missing") + "/pvdisk.log", "No such file or directory"},
           {folder, "Is a directory"},
           {folder + "/", "is not a file"},
           {"", "is not a file"}}) {
    SCOPED_TRACE(c.value);
    CommandResult result =
        RunPvdisk({"mount", mountpoint, "--disk", image, "--log", c.value});
    ExpectUsageError(result);
    EXPECT_NE(result.err.find("--log"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(c.says), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("syslog"), std::string::npos) << result.err;
    EXPECT_FALSE(IsMounted(mountpoint));
    EXPECT_TRUE(PvdiskProcessesMentioning(mountpoint).empty());
  }
  EXPECT_EQ(access(dir.Path("missing").c_str(), F_OK), -1);
}

}  // namespace
}  // namespace pvdisk::fuse_testing
