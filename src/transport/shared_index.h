// Atomic access to the 16- and 32-bit indices that live in shared memory. The
// memory is plain (it is a memfd mapping, possibly mapped by another process),
// so it is accessed through std::atomic_ref rather than declared atomic.
#pragma once

#include <atomic>
#include <cstdint>

namespace pvdisk::transport {

template <typename T>
T LoadAcquire(T& shared) {
  return std::atomic_ref<T>(shared).load(std::memory_order_acquire);
}
template <typename T>
T LoadRelaxed(T& shared) {
  return std::atomic_ref<T>(shared).load(std::memory_order_relaxed);
}
template <typename T>
void StoreRelease(T& shared, T value) {
  std::atomic_ref<T>(shared).store(value, std::memory_order_release);
}
template <typename T>
void StoreRelaxed(T& shared, T value) {
  std::atomic_ref<T>(shared).store(value, std::memory_order_relaxed);
}
// The full barrier between publishing an index and reading the peer's event
// index (store->load ordering; a release store alone does not give it).
inline void FullBarrier() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace pvdisk::transport
