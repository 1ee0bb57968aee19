#include "trace/queue_trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "stats/clock.h"

namespace pvdisk::trace {
namespace {

constexpr uint64_t kMask = QueueTrace::kCapacity - 1;
static_assert((QueueTrace::kCapacity & kMask) == 0, "a power of two");

uint32_t ThreadId() {
  thread_local const uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

}  // namespace

QueueTrace::~QueueTrace() = default;

QueueTrace* QueueTrace::Off() {
  static QueueTrace off(0);
  return &off;
}

void QueueTrace::Record(TraceEvent event) {
  if (block_only_.load(std::memory_order_relaxed) &&
      !IsBlockAction(event.action)) {
    return;
  }
  event.time_ns = stats::MonotonicNanos();
  event.tid = ThreadId();
  event.queue = queue_;
  uint64_t position = tail_.load(std::memory_order_relaxed);
  Cell* cell;
  for (;;) {
    cell = &cells_[position & kMask];
    uint64_t sequence = cell->sequence.load(std::memory_order_acquire);
    auto ahead = static_cast<int64_t>(sequence - position);
    if (ahead == 0) {
      if (tail_.compare_exchange_weak(position, position + 1,
                                      std::memory_order_relaxed)) {
        break;
      }
    } else if (ahead < 0) {
      // The drain has not freed this cell yet: the ring is full.
      lost_.fetch_add(1, std::memory_order_relaxed);
      return;
    } else {
      position = tail_.load(std::memory_order_relaxed);
    }
  }
  cell->event = event;
  cell->sequence.store(position + 1, std::memory_order_release);
}

void QueueTrace::Start(TraceScope scope) {
  if (cells_ == nullptr) {
    cells_ = std::make_unique<Cell[]>(kCapacity);
    for (uint64_t i = 0; i < kCapacity; ++i) {
      cells_[i].sequence.store(i, std::memory_order_relaxed);
    }
  }
  TraceEvent stale[256];
  while (Drain(stale, 256) > 0) {
  }
  lost_.store(0, std::memory_order_relaxed);
  block_only_.store(scope == TraceScope::kBlock, std::memory_order_relaxed);
  on_.store(true, std::memory_order_release);
}

void QueueTrace::Stop() { on_.store(false, std::memory_order_release); }

size_t QueueTrace::Drain(TraceEvent* out, size_t max) {
  if (cells_ == nullptr) return 0;
  size_t count = 0;
  while (count < max) {
    Cell& cell = cells_[head_ & kMask];
    if (cell.sequence.load(std::memory_order_acquire) != head_ + 1) break;
    out[count++] = cell.event;
    cell.sequence.store(head_ + kCapacity, std::memory_order_release);
    ++head_;
  }
  return count;
}

}  // namespace pvdisk::trace
