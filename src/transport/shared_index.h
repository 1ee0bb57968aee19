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
// The full barrier between publishing an index (or an entry's flags) and
// reading the peer's event index or suppression flags: store->load ordering,
// which a release store followed by a load does not give. Both sides of a
// ring do publish, barrier, read, so at least one of them sees the other's
// store and no notification is lost (the Xen and virtio rings' "full memory
// barrier" rule).
//
// The peer may be another process (a backend) or code that is not ours, so
// the contract is the one the ring protocols state, on the hardware: a full
// barrier instruction between this side's store and its load, and a compiler
// barrier (the "memory" clobber) so that neither moves across it. That is the
// instruction a seq_cst std::atomic_thread_fence compiles to (mfence,
// dmb ish), written out because ThreadSanitizer does not model fences (GCC
// refuses one under -fsanitize=thread). Nothing is lost to TSan: the
// happens-before edges of the ring are the release stores and acquire loads
// of the indices and flags around this barrier, which it does model; the
// store->load order the barrier adds is not a happens-before edge.
inline void FullBarrier() {
#if defined(__x86_64__)
  asm volatile("lock orq $0, (%%rsp)" ::: "memory", "cc");
#elif defined(__i386__)
  asm volatile("lock orl $0, (%%esp)" ::: "memory", "cc");
#elif defined(__aarch64__)
  asm volatile("dmb ish" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace pvdisk::transport
