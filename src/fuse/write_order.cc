#include "fuse/write_order.h"

#include <vector>

namespace pvdisk::fuse {

WriteOrder::SlotSpan WriteOrder::SlotsOf(uint64_t first, uint64_t count) {
  uint64_t first_stripe = first >> kStripeShift;
  uint64_t last_stripe = (first + (count == 0 ? 0 : count - 1)) >> kStripeShift;
  uint64_t stripes = last_stripe - first_stripe + 1;
  if (stripes >= kSlots) return {0, kSlots};
  return {static_cast<uint32_t>(first_stripe % kSlots),
          static_cast<uint32_t>(stripes)};
}

std::optional<WriteOrder::Hold> WriteOrder::TryAcquireWrite(uint64_t first,
                                                            uint64_t count) {
  SlotSpan span = SlotsOf(first, count);
  for (uint32_t i = 0; i < span.count; ++i) {
    uint64_t before = SlotAt(span, i).word.fetch_add(kPlainOne);
    if (before >= kRmwOne) {  // an RMW is registered here: back out
      LeaveFast(span, i + 1);
      return std::nullopt;
    }
  }
  return Hold{first, count, Hold::Kind::kPlainFast};
}

void WriteOrder::AcquireWrite(uint64_t first, uint64_t count, Start start) {
  if (std::optional<Hold> hold = TryAcquireWrite(first, count)) {
    start(*hold);
    return;
  }
  Hold hold{first, count, Hold::Kind::kPlainLocked};
  lock_.Acquire(first, count, RangeLock::Mode::kShared,
                [hold, start = std::move(start)] { start(hold); });
}

void WriteOrder::AcquireReadModifyWrite(uint64_t first, uint64_t count,
                                        Start start) {
  Draining rmw{Hold{first, count, Hold::Kind::kReadModifyWrite},
               std::move(start)};
  SlotSpan span = SlotsOf(first, count);
  {
    // Registering and checking under drain_mu_: a plain write ending after
    // our registration sees it and calls StartDrained, which needs the
    // mutex, so it cannot miss us.
    std::lock_guard<std::mutex> lock(drain_mu_);
    for (uint32_t i = 0; i < span.count; ++i) {
      SlotAt(span, i).word.fetch_add(kRmwOne);
    }
    if (PlainWritesIn(span)) {
      draining_.push_back(std::move(rmw));
      return;
    }
  }
  LockExclusive(std::move(rmw));
}

void WriteOrder::Release(const Hold& hold) {
  switch (hold.kind) {
    case Hold::Kind::kPlainFast: {
      SlotSpan span = SlotsOf(hold.first, hold.count);
      LeaveFast(span, span.count);
      return;
    }
    case Hold::Kind::kPlainLocked:
      lock_.Release(hold.first, hold.count, RangeLock::Mode::kShared);
      return;
    case Hold::Kind::kReadModifyWrite: {
      SlotSpan span = SlotsOf(hold.first, hold.count);
      for (uint32_t i = 0; i < span.count; ++i) {
        SlotAt(span, i).word.fetch_sub(kRmwOne);
      }
      lock_.Release(hold.first, hold.count, RangeLock::Mode::kExclusive);
      return;
    }
  }
}

void WriteOrder::LeaveFast(const SlotSpan& span, uint32_t n) {
  bool wake = false;
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t before = SlotAt(span, i).word.fetch_sub(kPlainOne);
    if (before >= kRmwOne && (before & kPlainMask) == 1) wake = true;
  }
  if (wake) StartDrained();
}

bool WriteOrder::PlainWritesIn(const SlotSpan& span) {
  for (uint32_t i = 0; i < span.count; ++i) {
    if ((SlotAt(span, i).word.load() & kPlainMask) != 0) return true;
  }
  return false;
}

void WriteOrder::StartDrained() {
  std::vector<Draining> ready;
  {
    std::lock_guard<std::mutex> lock(drain_mu_);
    for (auto it = draining_.begin(); it != draining_.end();) {
      if (PlainWritesIn(SlotsOf(it->hold.first, it->hold.count))) {
        ++it;
        continue;
      }
      ready.push_back(std::move(*it));
      it = draining_.erase(it);
    }
  }
  for (Draining& rmw : ready) LockExclusive(std::move(rmw));
}

void WriteOrder::LockExclusive(Draining rmw) {
  Hold hold = rmw.hold;
  lock_.Acquire(hold.first, hold.count, RangeLock::Mode::kExclusive,
                [hold, start = std::move(rmw.start)] { start(hold); });
}

}  // namespace pvdisk::fuse
