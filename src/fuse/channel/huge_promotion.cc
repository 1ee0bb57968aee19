#include "fuse/channel/huge_promotion.h"

#include <algorithm>

namespace pvdisk::fuse::channel {

HugePromotion::HugePromotion(uint8_t* base, size_t bytes, uint32_t queues,
                             uint32_t depth, uint32_t payload_bytes,
                             size_t limit_bytes)
    : base_(base),
      pages_((bytes + kHugePageBytes - 1) / kHugePageBytes),
      depth_(depth),
      payload_bytes_(payload_bytes),
      limit_bytes_(limit_bytes),
      states_(new std::atomic<uint8_t>[pages_]),
      asked_bytes_(new std::atomic<size_t>[queues]) {
  for (size_t p = 0; p < pages_; ++p) {
    states_[p].store(static_cast<uint8_t>(State::kSmall));
  }
  for (uint32_t q = 0; q < queues; ++q) asked_bytes_[q].store(0);
}

void HugePromotion::MarkHuge(uintptr_t start, uintptr_t end) {
  const auto base = reinterpret_cast<uintptr_t>(base_);
  for (size_t p = (start - base) / kHugePageBytes;
       p < pages_ && base + p * kHugePageBytes < end; ++p) {
    states_[p].store(static_cast<uint8_t>(State::kHuge));
  }
}

bool HugePromotion::Want(uint32_t qid, uint32_t index) {
  if (asked_bytes_[qid].load(std::memory_order_relaxed) + kHugePageBytes >
      limit_bytes_) {
    return false;  // the queue's bound is reached
  }
  const uint8_t* start =
      base_ + (size_t{qid} * depth_ + index) * payload_bytes_;
  const size_t first = PageOf(start);
  const size_t last = PageOf(start + payload_bytes_ - 1);
  bool asked = false;
  for (size_t p = first; p <= last && p < pages_; ++p) {
    if (StateOf(p) != State::kSmall) continue;
    // Reserve the bytes first: two threads asking at once stay in bound.
    if (asked_bytes_[qid].fetch_add(kHugePageBytes) + kHugePageBytes >
        limit_bytes_) {
      asked_bytes_[qid].fetch_sub(kHugePageBytes);
      break;
    }
    uint8_t small = static_cast<uint8_t>(State::kSmall);
    if (!states_[p].compare_exchange_strong(
            small, static_cast<uint8_t>(State::kWanted))) {
      asked_bytes_[qid].fetch_sub(kHugePageBytes);  // another asked first
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(p);
    }
    asked = true;
  }
  if (asked) {
    generation_.fetch_add(1, std::memory_order_seq_cst);
    cv_.notify_one();
  }
  return asked;
}

bool HugePromotion::Pinnable(uint64_t entry) const {
  const uint8_t* start = base_ + entry * payload_bytes_;
  const size_t first = PageOf(start);
  const size_t last = PageOf(start + payload_bytes_ - 1);
  for (size_t p = first; p <= last && p < pages_; ++p) {
    if (StateOf(p) == State::kWanted) return false;
  }
  return true;
}

std::vector<uint8_t*> HugePromotion::Pending(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, wait, [&] { return !pending_.empty() || interrupted_; });
  interrupted_ = false;
  std::vector<uint8_t*> pages;
  for (size_t p : pending_) pages.push_back(base_ + p * kHugePageBytes);
  return pages;
}

void HugePromotion::Settle(uint8_t* page, State state) {
  const size_t p = PageOf(page);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(std::remove(pending_.begin(), pending_.end(), p),
                   pending_.end());
  }
  states_[p].store(static_cast<uint8_t>(state), std::memory_order_release);
  if (state == State::kHuge) ++promoted_;
  if (state == State::kGaveUp) ++gave_up_;
}

void HugePromotion::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_ = true;
  cv_.notify_all();
}

}  // namespace pvdisk::fuse::channel
