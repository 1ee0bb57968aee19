#include "base/event_limiter.h"

namespace pvdisk {

EventLimiter::Decision EventLimiter::Admit(const std::string& key,
                                           uint64_t now_ns) {
  Decision decision;
  auto [it, added] = windows_.try_emplace(key);
  Window& window = it->second;
  if (added || now_ns - window.start_ns >= window_ns_) {
    decision.suppressed_before = window.suppressed;
    window = Window{now_ns, 0, 0};
  }
  if (window.written < burst_) {
    ++window.written;
    decision.write = true;
  } else {
    ++window.suppressed;
  }
  return decision;
}

std::vector<std::pair<std::string, uint64_t>> EventLimiter::TakeSuppressed() {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (auto& [key, window] : windows_) {
    if (window.suppressed == 0) continue;
    out.emplace_back(key, window.suppressed);
    window.suppressed = 0;
  }
  return out;
}

}  // namespace pvdisk
