#include "io/wake_margin.h"

#include <algorithm>

namespace pvdisk::io {

void WakeMargin::Learn(int64_t late_ns) {
  if (late_ns < 0) return;
  late_[next_] = late_ns;
  next_ = (next_ + 1) % kWindow;
  count_ = std::min(count_ + 1, kWindow);
  // The (kSkipped + 1)-th latest of what is held; with few samples, the
  // same share of them left out (none below ten).
  std::array<int64_t, kWindow> sorted = late_;
  const unsigned skipped = count_ * kSkipped / kWindow;
  auto nth = sorted.begin() + (count_ - 1 - skipped);
  std::nth_element(sorted.begin(), nth, sorted.begin() + count_);
  margin_ns_ = std::min(*nth + kSlackNs, kMaxNs);
}

}  // namespace pvdisk::io
