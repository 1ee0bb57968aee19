// Test-only fault injection: an engine decorator that fails as a whole (its
// Run() returns -EIO, as an io_uring whose submission or wait failed would)
// at the N-th submission counted by its trigger, once. PVDISK_TEST_FAULT=fail=N
// turns it on (test_fault.h); it exists to test that a backend survives a
// failing engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "io/io_engine.h"

namespace pvdisk::io {

// Shared by the engines it is to fail (each backend thread's, and the ones
// that replace them), so that exactly one failure happens in all.
class EngineFailTrigger {
 public:
  explicit EngineFailTrigger(uint64_t fail_at) : fail_at_(fail_at) {}
  // Counts one submission; true for the fail_at-th (1-based), only once.
  bool CountSubmission() {
    return submissions_.fetch_add(1, std::memory_order_relaxed) + 1 == fail_at_;
  }

 private:
  const uint64_t fail_at_;
  std::atomic<uint64_t> submissions_{0};
};

// Returns an engine that behaves like `inner` until `trigger` fires on one
// of its Queue() calls: that request still goes to `inner` (so a real I/O is
// in flight when the engine fails), and from then on every Run() returns
// -EIO without reaping. Destroying the engine destroys `inner`, which for
// io_uring waits for what is in flight.
std::unique_ptr<IoEngine> WrapWithEngineFailure(
    std::unique_ptr<IoEngine> inner,
    std::shared_ptr<EngineFailTrigger> trigger);

}  // namespace pvdisk::io
