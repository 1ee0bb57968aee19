// The virtio packed virtqueue (VIRTIO_F_RING_PACKED; virtio 1.1+ spec,
// "Packed Virtqueues"; reference/protocols.md §3.7): plain structs, the
// layout of one queue's ring memory, the wrap-counter arithmetic and the
// event-suppression rule. The virtio-blk request format carried in it is
// the split queue's (../virtio/format.h, blk_chain.h, blk_decoder.h). The
// rules live in driver_ring.* and device_ring.*.
//
// Positions: each side counts descriptors it has passed with a free-running
// 32-bit counter. A counter `c` names ring entry c % size in lap c / size;
// its wrap counter is 1 on even laps (both sides start at 1) and 0 on odd
// ones. 2^32 is a multiple of 2 * size, so this holds across the counter's
// own wrap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/virtio/format.h"

namespace pvdisk::transport::virtio_packed {

inline constexpr uint32_t kPageSize = virtio::kPageSize;
inline constexpr uint32_t kMaxQueueSize = 32768;

// Descriptor flags: NEXT, WRITE and INDIRECT as in the split queue, plus the
// two that say who owns the entry.
inline constexpr uint16_t kDescNext = virtio::kDescNext;
inline constexpr uint16_t kDescWrite = virtio::kDescWrite;
inline constexpr uint16_t kDescIndirect = virtio::kDescIndirect;
inline constexpr uint16_t kDescAvail = 1u << 7;
inline constexpr uint16_t kDescUsed = 1u << 15;

// One ring entry (pvirtq_desc), also the entry of an indirect table (where
// only WRITE counts and the id is ignored).
struct Desc {
  uint64_t addr;  // byte offset into the queue's data area
  uint32_t len;
  uint16_t id;  // buffer id, in the last descriptor of a chain
  uint16_t flags;
};
static_assert(sizeof(Desc) == 16);
static_assert(offsetof(Desc, id) == 12 && offsetof(Desc, flags) == 14);

// Event suppression (pvirtq_event_suppress): the driver's area tells the
// device when to interrupt; the device's area tells the driver when to kick.
// Read and written as one 32-bit word so that a peer never sees half.
inline constexpr uint16_t kEventEnable = 0;   // notify on every publish
inline constexpr uint16_t kEventDisable = 1;  // never notify
inline constexpr uint16_t kEventDesc = 2;     // notify at one position
struct EventSuppress {
  uint16_t off_wrap;  // position (15 bits) | wrap counter << 15
  uint16_t flags;     // kEvent*
};
static_assert(sizeof(EventSuppress) == 4);

// Where the parts of a queue of `size` entries live: the descriptor ring at
// 0, the driver's event suppression right after it, the device's on the next
// page (a page of its own keeps the device's writes off the driver's cache
// lines).
struct RingLayout {
  size_t desc;
  size_t driver_event;
  size_t device_event;
  size_t bytes;  // total, a multiple of kPageSize
};

constexpr RingLayout LayoutFor(uint32_t size) {
  RingLayout layout{};
  layout.desc = 0;
  layout.driver_event = size_t{16} * size;
  layout.device_event =
      virtio::RoundUpToPage(layout.driver_event + sizeof(EventSuppress));
  layout.bytes =
      virtio::RoundUpToPage(layout.device_event + sizeof(EventSuppress));
  return layout;
}

// The ring entry and wrap counter of position counter `count`.
constexpr uint32_t EntryOf(uint32_t count, uint32_t size) {
  return count & (size - 1);
}
constexpr bool WrapOf(uint32_t count, uint32_t size) {
  return ((count / size) & 1) == 0;
}
// The event suppression word naming position counter `count`.
constexpr uint16_t OffWrapOf(uint32_t count, uint32_t size) {
  return static_cast<uint16_t>(EntryOf(count, size) |
                               (WrapOf(count, size) ? 0x8000u : 0u));
}

// The flags that make an entry available (driver) or used (device) in the
// lap whose wrap counter is `wrap`.
constexpr uint16_t AvailBits(bool wrap) {
  return wrap ? kDescAvail : kDescUsed;
}
constexpr uint16_t UsedBits(bool wrap) {
  return wrap ? kDescAvail | kDescUsed : 0;
}
constexpr uint16_t kOwnerBits = kDescAvail | kDescUsed;

// The event rule with kEventDesc: a producer that moved its position
// counter from `old_count` to `new_count` must notify iff the position
// `off_wrap` names is one of those it just passed, [old, new), compared
// modulo 2 * size (a position and its wrap counter name one of 2 * size
// values).
constexpr bool NeedEvent(uint16_t off_wrap, uint32_t old_count,
                         uint32_t new_count, uint32_t size) {
  const uint32_t mask = 2 * size - 1;
  uint32_t offset = off_wrap & 0x7fffu;
  bool wrap = (off_wrap & 0x8000u) != 0;
  uint32_t event = (offset + (wrap ? 0 : size)) & mask;
  return ((new_count - event - 1) & mask) < ((new_count - old_count) & mask);
}

// Whether a producer that moved its position counter from `old_count` to
// `new_count` must notify a peer whose event suppression is `event`:
// DISABLE never, DESC by NeedEvent when the event-index feature is on
// (`event_idx`), ENABLE (and DESC without the feature) always.
constexpr bool ShouldNotify(EventSuppress event, bool event_idx,
                            uint32_t old_count, uint32_t new_count,
                            uint32_t size) {
  if (event.flags == kEventDisable) return false;
  if (event.flags == kEventDesc && event_idx) {
    return NeedEvent(event.off_wrap, old_count, new_count, size);
  }
  return true;
}

}  // namespace pvdisk::transport::virtio_packed
