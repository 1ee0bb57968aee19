// Spreading (--fuse-spread; the inline placement): which queue thread
// commits a reply that a queue thread makes on its own thread.
//
// The kernel finds a COMMIT_AND_FETCH's entry by the queue id and commit id
// it carries, whichever of our rings it comes on, and sends that entry's
// next request to the ring that committed it. So an entry of FUSE queue q
// may be held by another queue's thread: the thread whose ring it was last
// committed on (UringEntry::holder) takes its requests and commits its
// replies. At depth a thread hands every other reply it makes to another
// queue thread, which commits it and keeps the entry; an entry that comes
// alone to a thread not its own goes home the same way. Depth is weighed (a
// request by the data it brings, which the kernel copies into the entry on
// the taking thread): sixteen reads, eight 4 KiB writes, or two large
// writes. One submitter's depth, all on its CPU's queue, then runs on every
// CPU. Pure: the commit router (commit_router.h) applies it.
#pragma once

#include <cstdint>

namespace pvdisk::fuse::channel {

// A queue thread holding two or more requests that weigh this many units
// at once sends every other reply out through another queue thread. A
// request weighs one unit and one more per kSpreadUnitBytes of data it
// brings (a WRITE's): the kernel copies that data into the entry on the
// thread whose ring takes the request, so one thread taking four 1 MiB
// writes copies 4 MiB in a row while the disk waits. So 4 KiB writes spread
// from 8 held (as when requests were counted alone, against 8), large
// writes from 2, reads (which bring nothing) from 16. Measured side by
// side, two builds mounted on one image, means of 4-6 rounds of fio:
// counted alone, 1 MiB writes at iodepth 4 never spread (1793 MiB/s against
// 2314 weighed by a first version, 1 unit per 16 KiB against 8, native
// 2301; these weights 2374 against its 2319); reads spreading from 16
// instead of 8 gave 4 KiB reads at iodepth 32 54.0K against 49.9K IOPS (and
// 51.7K against 49.2K with the mounts' order swapped) and 128 KiB reads at
// iodepth 8 10.6K against 9.7K, two 4 KiB jobs at depth 32 the same (59.9K,
// 59.8K). A threshold of two requests of any size made 4 KiB reads at depth
// 32 slower still (45.8K against 48.9K).
inline constexpr uint32_t kSpreadDepth = 16;
inline constexpr uint32_t kSpreadUnitBytes = 4 << 10;

// What a request that brings `payload_bytes` weighs.
inline uint32_t SpreadUnits(uint32_t payload_bytes) {
  return 1 + payload_bytes / kSpreadUnitBytes;
}

// What the holder of an entry knows when it replies to it.
struct SpreadState {
  uint32_t queues = 1;        // queue threads of the channel
  uint32_t holder = 0;        // the thread replying (a queue id)
  uint32_t owner = 0;         // the entry's FUSE queue
  uint32_t with_handler = 0;  // requests the holder holds, this one included
  uint32_t held_units = 0;    // what they weigh
};

// The queue thread to hand the entry to, or kKeep to commit it on the
// holder. `turn`: the holder's count of replies at depth (advanced here).
inline constexpr uint32_t kKeep = UINT32_MAX;
uint32_t SpreadTarget(const SpreadState& state, uint32_t* turn);

}  // namespace pvdisk::fuse::channel
