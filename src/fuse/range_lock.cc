#include "fuse/range_lock.h"

#include <algorithm>

namespace pvdisk::fuse {

bool RangeLock::ConflictsWithHeld(const Hold& hold) const {
  return std::any_of(held_.begin(), held_.end(), [&](const Hold& held) {
    return held.ConflictsWith(hold);
  });
}

void RangeLock::Acquire(uint64_t first, uint64_t count, Mode mode,
                        std::function<void()> start) {
  Hold hold{first, count, mode};
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool blocked =
        ConflictsWithHeld(hold) ||
        std::any_of(waiting_.begin(), waiting_.end(), [&](const Waiter& w) {
          return w.hold.ConflictsWith(hold);
        });
    if (blocked) {
      waiting_.push_back(Waiter{hold, std::move(start)});
      return;
    }
    held_.push_back(hold);
  }
  start();
}

void RangeLock::Release(uint64_t first, uint64_t count, Mode mode) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(held_.begin(), held_.end(), [&](const Hold& h) {
      return h.first == first && h.count == count && h.mode == mode;
    });
    if (it != held_.end()) held_.erase(it);
    // A waiter may start if it conflicts with nothing held and with no
    // earlier waiter that still waits.
    std::vector<Hold> earlier;
    for (auto w = waiting_.begin(); w != waiting_.end();) {
      bool blocked =
          ConflictsWithHeld(w->hold) ||
          std::any_of(earlier.begin(), earlier.end(),
                      [&](const Hold& h) { return h.ConflictsWith(w->hold); });
      if (blocked) {
        earlier.push_back(w->hold);
        ++w;
        continue;
      }
      held_.push_back(w->hold);
      ready.push_back(std::move(w->start));
      w = waiting_.erase(w);
    }
  }
  for (auto& start : ready) start();
}

}  // namespace pvdisk::fuse
