// Atomic access to the 32-bit indices that live in shared memory. The memory
// is plain (it is a memfd mapping, possibly mapped by another process), so it
// is accessed through std::atomic_ref rather than declared atomic.
#pragma once

#include <atomic>
#include <cstdint>

namespace pvdisk::transport {

inline uint32_t LoadAcquire(uint32_t& shared) {
  return std::atomic_ref<uint32_t>(shared).load(std::memory_order_acquire);
}
inline uint32_t LoadRelaxed(uint32_t& shared) {
  return std::atomic_ref<uint32_t>(shared).load(std::memory_order_relaxed);
}
inline void StoreRelease(uint32_t& shared, uint32_t value) {
  std::atomic_ref<uint32_t>(shared).store(value, std::memory_order_release);
}
// The full barrier between publishing an index and reading the peer's event
// index (store->load ordering; a release store alone does not give it).
inline void FullBarrier() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace pvdisk::transport
