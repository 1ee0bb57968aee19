// Happens-before edges that the kernel makes and ThreadSanitizer cannot see.
// Some state crosses threads only through the kernel: a value handed to it
// in one FUSE reply comes back in a later request, which another thread may
// take (a stats file's handle: OPEN's reply, then READ and RELEASE). The
// kernel orders the two (it cannot send the request before it has the
// reply), but a reply written and a request read are system calls on two
// threads, and TSan sees no edge between them. KernelOrderedRelease(x) where
// x is handed to the kernel, and KernelOrderedAcquire(x) where it comes back,
// tell TSan of exactly that edge, for that object only (so it hides nothing
// else). Outside a TSan build they are nothing.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define PVDISK_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PVDISK_UNDER_TSAN 1
#endif
#endif

#ifdef PVDISK_UNDER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace pvdisk {

// What this thread did to `object` so far happens before what a thread does
// after a KernelOrderedAcquire(object) that the kernel orders after this.
inline void KernelOrderedRelease([[maybe_unused]] const void* object) {
#ifdef PVDISK_UNDER_TSAN
  __tsan_release(const_cast<void*>(object));
#endif
}

// The other end of KernelOrderedRelease(object).
inline void KernelOrderedAcquire([[maybe_unused]] const void* object) {
#ifdef PVDISK_UNDER_TSAN
  __tsan_acquire(const_cast<void*>(object));
#endif
}

}  // namespace pvdisk
