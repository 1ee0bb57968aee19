#include "fuse/channel/huge_collapser.h"

#include <sys/mman.h>

#include <cerrno>
#include <map>

#include "base/thread.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1
#endif

namespace pvdisk::fuse::channel {

HugeCollapser::HugeCollapser(HugePromotion* promotion,
                             std::function<void()> wake_queues)
    : promotion_(promotion), wake_queues_(std::move(wake_queues)) {
  thread_ = StartThreadWithoutSignals("pvdisk-huge", [this] { Run(); });
}

HugeCollapser::~HugeCollapser() {
  stop_.store(true, std::memory_order_release);
  promotion_->Interrupt();
  if (thread_.joinable()) thread_.join();
}

int HugeCollapser::Collapse(uint8_t* page) {
  if (madvise(page, kHugePageBytes, MADV_HUGEPAGE) != 0) return errno;
  if (madvise(page, kHugePageBytes, MADV_COLLAPSE) != 0) return errno;
  return 0;
}

void HugeCollapser::Run() {
  std::map<uint8_t*, int> attempts;
  while (!stop_.load(std::memory_order_acquire)) {
    const std::vector<uint8_t*> pages =
        promotion_->Pending(std::chrono::seconds(1));
    if (pages.empty() || stop_.load(std::memory_order_acquire)) continue;
    // The queue threads drop their fixed buffers of the wanted entries in
    // their next round; give them that round.
    wake_queues_();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    bool retry = false;
    for (uint8_t* page : pages) {
      const int error = Collapse(page);
      if (error == 0) {
        promotion_->Settle(page, HugePromotion::State::kHuge);
        attempts.erase(page);
      } else if ((error == EAGAIN || error == EBUSY || error == ENOMEM) &&
                 ++attempts[page] < kMaxAttempts) {
        retry = true;
      } else {
        promotion_->Settle(page, HugePromotion::State::kGaveUp);
        attempts.erase(page);
      }
    }
    if (retry) std::this_thread::sleep_for(kRetryAfter);
  }
}

}  // namespace pvdisk::fuse::channel
