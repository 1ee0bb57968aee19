// FixedBufferTable: the fixed buffers of one FUSE uring queue thread's
// io_uring, which the engines that borrow that ring (io/ring_lender.h) read
// into and write from with READ_FIXED / WRITE_FIXED.
//
// Two kinds of buffer share its one sparse table:
//   - engine buffers (AddEngineBuffers): a disk queue's data pool,
//     registered whole when its engine first uses the ring; slots from 0.
//   - payload buffers (ForPayload): the FUSE entries' payloads in the
//     payload arena (payload_arena.h), which the disks' queues read into
//     and write from directly (zero copy). One slot per entry, after
//     kEngineSlots. An entry is registered when an I/O first lands in it,
//     and only as far as that I/O reaches (rounded up to a power of two),
//     then again, larger, when a later one reaches further.
//
// Why payload buffers: an ordinary read or write of user memory pins its
// pages for every I/O (get_user_pages on submission, unpinning on
// completion); a fixed buffer was pinned once. Why lazily and in part:
// registering pins the pages and so makes them resident, and the arena is
// mostly untouched address space (2 x 128 x 1 MiB by default): registered
// whole, the daemon's RSS after a 4 KiB random-read run was 287 MiB, against
// 58 MiB registered as used, where the pinned pages are the ones the I/O
// touches anyway.
//
// Owner thread only. The table lives as long as the ring (the kernel drops
// its registrations when the ring closes); the arena must outlive both.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuse/channel/payload_arena.h"

namespace pvdisk::fuse::channel {

class FixedBufferTable {
 public:
  // Slots for engine buffers (one per disk queue a thread drives).
  static constexpr unsigned kEngineSlots = 256;
  // The kernel's limit on a ring's fixed buffers (IORING_MAX_REG_BUFFERS):
  // entries beyond kMaxSlots - kEngineSlots are not registered.
  static constexpr unsigned kMaxSlots = 1u << 14;
  // The largest I/O that goes through a payload buffer. Larger ones gained
  // nothing and lost a little: measured side by side on a loop device over
  // tmpfs (the CPU the limit), with every size through payload buffers
  // against none, 4 KiB random reads at depth 32 went 1.08x (median of 14
  // paired rounds), 16 KiB 1.03-1.17x, 64 KiB 0.94-1.06x, 128 KiB
  // sequential reads at depth 8 0.89-0.99x (4 rounds) and 1 MiB writes at
  // depth 4 0.82-1.11x (3 of 4 slower). A plain I/O's pages are pinned as
  // folios, and a huge entry (payload_arena.h) is one folio, which the bio
  // then carries as one segment; a registration of part of it becomes one
  // segment per page (not traced further).
  static constexpr uint32_t kLargestPayloadIo = 64 << 10;

  // `arena` may be null (no payload buffers then). Makes no system call:
  // the table is made on first use.
  FixedBufferTable(io_uring* ring, const PayloadArena* arena);
  FixedBufferTable(const FixedBufferTable&) = delete;
  FixedBufferTable& operator=(const FixedBufferTable&) = delete;

  // Registers `buffers` in the next free engine slots. Returns the first
  // one's index, the others following, or -1 when the ring cannot take
  // them.
  int AddEngineBuffers(const std::vector<iovec>& buffers);

  // The index of the fixed buffer that holds [data, data + length): the
  // slot of the arena entry it lies in, registered (or enlarged) here if
  // needed. -1 when none can: longer than kLargestPayloadIo, not within one
  // entry of the arena, an entry that is to be made huge (DropUnpinnable), or
  // the kernel refused a registration (then payload buffers stay off for the
  // ring's life, rather than cost a refused system call per I/O; memlock limits
  // make that the usual case for an unprivileged user).
  int ForPayload(const void* data, size_t length);

  // Empties the slots of entries that are to be made huge (HugePromotion::
  // Pinnable false), so that their pages can be collapsed: registered pages
  // stay pinned. Cheap unless a page became wanted since the last call;
  // called by the owner thread every round.
  void DropUnpinnable();

  // How many payload registrations (first or enlarging) were made.
  uint64_t payload_registrations() const { return payload_registrations_; }
  bool payload_refused() const { return payload_refused_; }

 private:
  bool EnsureTable();

  io_uring* const ring_;
  const PayloadArena* const arena_;
  unsigned entry_slots_ = 0;  // arena entries that have a slot
  bool table_made_ = false;
  bool table_failed_ = false;
  unsigned engine_slots_used_ = 0;
  // Per arena entry: the bytes from its start that are registered (0: none).
  std::vector<uint32_t> registered_;
  uint64_t payload_registrations_ = 0;
  bool payload_refused_ = false;
  uint64_t promotion_seen_ = 0;  // HugePromotion::generation() last dropped
};

}  // namespace pvdisk::fuse::channel
