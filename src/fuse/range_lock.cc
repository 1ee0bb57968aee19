#include "fuse/range_lock.h"

#include <algorithm>

namespace pvdisk::fuse {

bool RangeLock::OverlapsHeld(const Range& range) const {
  return std::any_of(held_.begin(), held_.end(),
                     [&](const Range& held) { return held.Overlaps(range); });
}

void RangeLock::Acquire(uint64_t first, uint64_t count,
                        std::function<void()> start) {
  Range range{first, count};
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool blocked =
        OverlapsHeld(range) ||
        std::any_of(waiting_.begin(), waiting_.end(),
                    [&](const Waiter& w) { return w.range.Overlaps(range); });
    if (blocked) {
      waiting_.push_back(Waiter{range, std::move(start)});
      return;
    }
    held_.push_back(range);
  }
  start();
}

void RangeLock::Release(uint64_t first, uint64_t count) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(held_.begin(), held_.end(), [&](const Range& r) {
      return r.first == first && r.count == count;
    });
    if (it != held_.end()) held_.erase(it);
    // A waiter may start if it overlaps nothing held and no earlier waiter.
    std::vector<Range> earlier;
    for (auto w = waiting_.begin(); w != waiting_.end();) {
      bool blocked =
          OverlapsHeld(w->range) ||
          std::any_of(earlier.begin(), earlier.end(),
                      [&](const Range& r) { return r.Overlaps(w->range); });
      if (blocked) {
        earlier.push_back(w->range);
        ++w;
        continue;
      }
      held_.push_back(w->range);
      ready.push_back(std::move(w->start));
      w = waiting_.erase(w);
    }
  }
  for (auto& start : ready) start();
}

}  // namespace pvdisk::fuse
