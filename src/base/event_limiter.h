// The rate limit of repeated log events: per key (an event's kind, disk and
// queue), at most `burst` lines in a window of `window_ns`, which starts at
// the first event of the key that is written. Events beyond the burst are
// only counted; the count is handed back with the key's first event after
// the window (to be written as one line before it) or by TakeSuppressed
// (at exit). Not thread-safe: its user locks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pvdisk {

class EventLimiter {
 public:
  EventLimiter(uint32_t burst, uint64_t window_ns)
      : burst_(burst), window_ns_(window_ns) {}

  struct Decision {
    bool write = false;  // write this event's line
    // Events of this key suppressed in the window that just ended: write a
    // line with this count first (0: none).
    uint64_t suppressed_before = 0;
  };
  // One event of `key` at `now_ns` (a monotonic clock).
  Decision Admit(const std::string& key, uint64_t now_ns);

  // The keys with suppressed events not reported yet, and their counts;
  // forgets them.
  std::vector<std::pair<std::string, uint64_t>> TakeSuppressed();

  uint32_t burst() const { return burst_; }
  uint64_t window_ns() const { return window_ns_; }

 private:
  struct Window {
    uint64_t start_ns = 0;
    uint32_t written = 0;
    uint64_t suppressed = 0;
  };
  const uint32_t burst_;
  const uint64_t window_ns_;
  std::map<std::string, Window> windows_;
};

}  // namespace pvdisk
