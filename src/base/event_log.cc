#include "base/event_log.h"

#include <time.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/event_limiter.h"
#include "base/log_sink.h"

namespace pvdisk {
namespace {

constexpr uint64_t kNanosPerSecond = 1'000'000'000;

std::mutex& LimiterMutex() {
  static std::mutex mu;
  return mu;
}

EventLimiter& Limiter() {
  static EventLimiter limiter(kEventBurst,
                              kEventWindowSeconds * kNanosPerSecond);
  return limiter;
}

uint64_t MonotonicNow() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * kNanosPerSecond +
         static_cast<uint64_t>(now.tv_nsec);
}

// "disk=NAME queue=Q KIND", the key of the rate limit and the start of the
// event's lines.
std::string Subject(Event event, std::string_view disk,
                    std::string_view queue) {
  return absl::StrCat("disk=", disk.empty() ? "-" : std::string(disk),
                      " queue=", queue.empty() ? "-" : std::string(queue), " ",
                      std::string(EventName(event)));
}

std::string SuppressedLine(const std::string& subject, uint64_t count) {
  return absl::StrCat(subject, ": ", count, " more suppressed (at most ",
                      kEventBurst, " lines of an event per ",
                      kEventWindowSeconds, " s)");
}

}  // namespace

std::string_view EventName(Event event) {
  switch (event) {
    case Event::kEngineRestart:
      return "engine_restart";
    case Event::kBackendRestart:
      return "backend_restart";
    case Event::kRingBroken:
      return "ring_broken";
    case Event::kInvalidRequest:
      return "invalid_request";
    case Event::kRefusedWrite:
      return "refused_write";
    case Event::kIoError:
      return "io_error";
  }
  return "event";
}

void LogEvent(Event event, std::string_view disk, std::string_view queue,
              std::string_view cause) {
  std::string subject = Subject(event, disk, queue);
  std::lock_guard<std::mutex> lock(LimiterMutex());
  EventLimiter::Decision decision = Limiter().Admit(subject, MonotonicNow());
  if (decision.suppressed_before > 0) {
    WriteLogLine(SuppressedLine(subject, decision.suppressed_before));
  }
  if (decision.write) {
    WriteLogLine(absl::StrCat(subject, ": ", std::string(cause)));
  }
}

void FlushEventLog() {
  std::lock_guard<std::mutex> lock(LimiterMutex());
  for (const auto& [subject, count] : Limiter().TakeSuppressed()) {
    WriteLogLine(SuppressedLine(subject, count));
  }
}

}  // namespace pvdisk
