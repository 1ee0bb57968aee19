// The rate limit of repeated events (EventLimiter, on a clock the test
// drives) and the lines LogEvent writes to a log file.
#include "base/event_log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "base/event_limiter.h"
#include "base/log.h"
#include "base/log_sink.h"
#include "gtest/gtest.h"

namespace pvdisk {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

TEST(EventLimiterTest, BurstThenCountThenReportWithTheNextWindow) {
  EventLimiter limiter(3, 10 * kSecond);
  for (int i = 0; i < 3; ++i) {
    EventLimiter::Decision d = limiter.Admit("a", 100 + i);
    EXPECT_TRUE(d.write);
    EXPECT_EQ(d.suppressed_before, 0u);
  }
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(limiter.Admit("a", kSecond + i).write);
  }
  // Another key has its own budget.
  EXPECT_TRUE(limiter.Admit("b", 2 * kSecond).write);
  // Still in the window: counted.
  EXPECT_FALSE(limiter.Admit("a", 10 * kSecond + 99).write);
  // The next window: the count comes first, then the event is written.
  EventLimiter::Decision next = limiter.Admit("a", 10 * kSecond + 100);
  EXPECT_TRUE(next.write);
  EXPECT_EQ(next.suppressed_before, 1001u);
  EXPECT_TRUE(limiter.TakeSuppressed().empty());
}

TEST(EventLimiterTest, TakeSuppressedHandsBackWhatIsPendingOnce) {
  EventLimiter limiter(1, kSecond);
  limiter.Admit("a", 0);
  limiter.Admit("a", 1);
  limiter.Admit("a", 2);
  limiter.Admit("b", 0);
  auto pending = limiter.TakeSuppressed();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].first, "a");
  EXPECT_EQ(pending[0].second, 2u);
  EXPECT_TRUE(limiter.TakeSuppressed().empty());
  // Reported already: the next window starts with nothing to report.
  EXPECT_EQ(limiter.Admit("a", 5 * kSecond).suppressed_before, 0u);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A log file as the daemon's: each line starts with the UTC time and the
// pid; an event names its disk, queue and kind; a storm becomes kEventBurst
// lines and one count.
TEST(EventLogTest, LinesCarryTimeDiskQueueAndCauseAndAStormIsCounted) {
  std::string dir =
      (std::filesystem::temp_directory_path() / "pvdisk_event_log_test.XXXXXX")
          .string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/log";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  SetLogTarget(LogTarget::kFile, fd);
  LogInfo("plain %d", 7);
  for (int i = 0; i < 10'000; ++i) {
    LogEvent(Event::kIoError, "event-log-test.img", "3",
             "read of 8 sectors at sector 0 failed: Input/output error");
  }
  LogEvent(Event::kEngineRestart, "event-log-test.img", "0,1", "once");
  FlushEventLog();
  SetLogTarget(LogTarget::kStderr);
  close(fd);

  std::string text = ReadAll(path);
  std::istringstream lines(text);
  std::string line;
  const std::regex prefix(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z pvdisk\[\d+\]: (.*)$)");
  int io_lines = 0, counts = 0, restarts = 0, plain = 0;
  uint64_t suppressed = 0;
  while (std::getline(lines, line)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, prefix)) << line;
    const std::string body = match[1];
    if (body == "plain 7") {
      ++plain;
    } else if (body ==
               "disk=event-log-test.img queue=3 io_error: read of 8 sectors "
               "at sector 0 failed: Input/output error") {
      ++io_lines;
    } else if (body.rfind("disk=event-log-test.img queue=3 io_error: ", 0) ==
               0) {
      ++counts;
      suppressed += std::stoull(body.substr(body.find(": ") + 2));
      EXPECT_NE(body.find(" more suppressed (at most 5 lines of an event per "
                          "10 s)"),
                std::string::npos)
          << body;
    } else if (body ==
               "disk=event-log-test.img queue=0,1 engine_restart: "
               "once") {
      ++restarts;
    } else {
      ADD_FAILURE() << "unexpected line: " << line;
    }
  }
  EXPECT_EQ(plain, 1);
  EXPECT_EQ(restarts, 1);
  // Within one window (the loop takes far less than 10 s) or, on a slow
  // machine, a few: each writes at most kEventBurst lines and one count.
  EXPECT_GE(io_lines, static_cast<int>(kEventBurst));
  EXPECT_GE(counts, 1);
  EXPECT_LE(io_lines + counts, 20) << text;
  EXPECT_EQ(io_lines + suppressed, 10'000u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pvdisk
