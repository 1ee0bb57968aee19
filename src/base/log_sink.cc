#include "base/log_sink.h"

#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pvdisk {
namespace {

std::atomic<LogTarget> g_target{LogTarget::kStderr};
std::atomic<int> g_fd{2};

}  // namespace

void SetLogTarget(LogTarget target, int fd) {
  if (target == LogTarget::kSyslog) {
    openlog("pvdisk", LOG_PID | LOG_NDELAY, LOG_DAEMON);
  }
  g_fd.store(fd, std::memory_order_relaxed);
  g_target.store(target, std::memory_order_release);
}

LogTarget CurrentLogTarget() {
  return g_target.load(std::memory_order_acquire);
}

LogTarget InheritedLogTarget() {
  LogTarget target = CurrentLogTarget();
  if (target == LogTarget::kFile && g_fd.load(std::memory_order_relaxed) != 2) {
    return LogTarget::kStderr;
  }
  return target;
}

std::string LogTimeNow() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm utc;
  gmtime_r(&now.tv_sec, &utc);
  char date[32];
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrFormat("%s.%06dZ", date, now.tv_nsec / 1000);
}

void WriteLogLine(std::string_view line) {
  switch (CurrentLogTarget()) {
    case LogTarget::kStderr: {
      std::string text = absl::StrCat("pvdisk: ", std::string(line), "\n");
      std::fputs(text.c_str(), stderr);
      return;
    }
    case LogTarget::kSyslog: {
      std::string text(line);
      syslog(LOG_WARNING, "%s", text.c_str());
      return;
    }
    case LogTarget::kFile: {
      std::string text = absl::StrCat(LogTimeNow(), " pvdisk[", getpid(),
                                      "]: ", std::string(line), "\n");
      const int fd = g_fd.load(std::memory_order_relaxed);
      // One write: O_APPEND places it whole at the end. A short write (a
      // full disk) loses the rest of the line, never the process.
      while (write(fd, text.data(), text.size()) < 0 && errno == EINTR) {
      }
      return;
    }
  }
}

}  // namespace pvdisk
