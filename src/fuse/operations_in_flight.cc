#include "fuse/operations_in_flight.h"

namespace pvdisk::fuse {

void OperationsInFlight::End() {
  if (count_.fetch_sub(1, std::memory_order_seq_cst) != 1) return;
  if (!waiting_.load(std::memory_order_seq_cst)) return;
  std::lock_guard<std::mutex> lock(mu_);
  zero_.notify_all();
}

void OperationsInFlight::WaitForZero() {
  WaitForZeroUntil(std::chrono::steady_clock::time_point::max());
}

bool OperationsInFlight::WaitForZeroUntil(
    std::chrono::steady_clock::time_point deadline) {
  waiting_.store(true, std::memory_order_seq_cst);
  std::unique_lock<std::mutex> lock(mu_);
  auto ended = [this] { return count_.load(std::memory_order_seq_cst) == 0; };
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    zero_.wait(lock, ended);
    return true;
  }
  return zero_.wait_until(lock, deadline, ended);
}

}  // namespace pvdisk::fuse
