// HugeCollapser: the thread that makes the payload arena's wanted huge
// pages huge (huge_promotion.h): MADV_HUGEPAGE, then MADV_COLLAPSE, which
// copies the entry's 4 KiB pages into one huge page in place.
//
// Why a thread of its own: a collapse took 19-41 ms here (allocating and
// copying 2 MiB on a loaded machine, 2026-12-05), which on a queue thread
// would stall every request of that queue. Why retries: the kernel refuses
// (EAGAIN) while any page of the range is pinned, by an I/O in flight on
// either entry of the page or by a queue thread's fixed buffer not yet
// dropped; before each pass it wakes the queue threads, which drop theirs
// (FixedBufferTable::DropUnpinnable). A page still refused after
// kMaxAttempts passes is given up on (it stays advised: a fault in an
// empty huge page's range then takes a huge page).
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "fuse/channel/huge_promotion.h"

namespace pvdisk::fuse::channel {

class HugeCollapser {
 public:
  static constexpr int kMaxAttempts = 100;
  static constexpr std::chrono::milliseconds kRetryAfter{20};

  // `wake_queues`: makes every queue thread run a round (any thread).
  HugeCollapser(HugePromotion* promotion, std::function<void()> wake_queues);
  // Stops the thread.
  ~HugeCollapser();
  HugeCollapser(const HugeCollapser&) = delete;
  HugeCollapser& operator=(const HugeCollapser&) = delete;

  // MADV_HUGEPAGE and MADV_COLLAPSE of one huge page: 0 or an errno.
  static int Collapse(uint8_t* page);

 private:
  void Run();

  HugePromotion* const promotion_;
  const std::function<void()> wake_queues_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pvdisk::fuse::channel
