// PayloadArena: the payload buffers of every FUSE uring entry, in one
// mapping that the disks' queues may grant to their backends directly
// (transport/lent_memory.h). A READ of whole sectors is then read by the
// backend straight into the entry's payload, from which the kernel copies
// it to the caller; a WRITE's data is written from the payload the kernel
// copied it into. pvdisk copies neither (counted in `zero_copy_ios`).
//
// Queue q's entry e has the payload_bytes at
// base + (q * depth + e) * payload_bytes. Anonymous memory: only the pages
// a request touches become resident, and the kernel reuses the entry
// committed last first, so the arena costs address space, not memory.
//
// Huge entries. The top `huge_entries` entries of each queue (e from
// depth - huge_entries up) are advised into transparent huge pages
// (MADV_HUGEPAGE), so that a large request's payload is physically
// contiguous and reaches the disk as a few segments instead of one per
// 4 KiB page. Why: a virtio-blk disk without indirect descriptors takes
// one descriptor per segment: native fio on this machine's disk read
// 128 KiB blocks 4x faster from hugetlb buffers than from its own, and
// pvdisk with huge entries beat the same build without them by 1.1-2.4x
// side by side (by how much moved with the disk; measured 2026-12-02,
// docs/perf/compare-2026-12-02-huge-pages.md and
// compare-2026-12-02-index-order-commits-*.md). Why the top ones: the channel
// registers entries in index order and the kernel hands out the entry
// registered (later: committed) last first, so a fresh queue that never holds
// more than huge_entries requests at once only ever uses huge ones; and the
// channel commits each batch of replies in index order, so that after a deeper
// burst has cycled through other entries the top ones come back on top (mostly:
// a reply committed alone goes on top whatever its index). What it costs: a
// touched huge entry is resident as a whole (2 MiB for two entries of 1 MiB),
// so at most huge_entries * payload_bytes per queue that has been that busy.
//
// Entries made huge on use. After a burst the kernel's order of free entries
// is mixed and large requests may land on entries in 4 KiB pages; the first
// large request on such an entry asks for its huge page, which a collapser
// thread then makes huge in place (huge_promotion.h, huge_collapser.h), up
// to as many bytes again per queue as the huge entries take. So the resident
// payloads stay within 2 * huge_entries * payload_bytes per queue, plus the
// 4 KiB pages that small requests touch.
//
// It must outlive the channel and every disk that lends it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fuse/channel/huge_promotion.h"
#include "transport/lent_memory.h"

namespace pvdisk::fuse::channel {

// pvdisk mount's --fuse-huge-entries default.
inline constexpr uint32_t kDefaultHugeEntries = 16;

class PayloadArena {
 public:
  // REQUIRES: payload_bytes is a multiple of 4096, huge_entries <= depth.
  static absl::StatusOr<std::unique_ptr<PayloadArena>> Create(
      uint32_t queues, uint32_t depth, uint32_t payload_bytes,
      uint32_t huge_entries = 0);
  ~PayloadArena();
  PayloadArena(const PayloadArena&) = delete;
  PayloadArena& operator=(const PayloadArena&) = delete;

  // The payload buffers of queue `qid`: depth * payload_bytes bytes.
  uint8_t* QueueBase(uint32_t qid) const {
    return base_ + size_t{qid} * depth_ * payload_bytes_;
  }
  uint32_t queues() const { return queues_; }
  uint32_t depth() const { return depth_; }
  uint32_t payload_bytes() const { return payload_bytes_; }
  transport::LentMemory lent() const { return {base_, bytes_}; }

  // The entries per queue advised into huge pages: as asked, or 0 where the
  // system has transparent huge pages off (then `huge_note` says why).
  uint32_t huge_entries() const { return huge_entries_; }
  const std::string& huge_note() const { return huge_note_; }
  // Which entries are to be made huge on use (null with no huge entries).
  // Shared by the queue threads and the collapser: thread-safe.
  HugePromotion* promotion() const { return promotion_.get(); }

 private:
  PayloadArena(uint8_t* base, size_t bytes, uint32_t queues, uint32_t depth,
               uint32_t payload_bytes)
      : base_(base),
        bytes_(bytes),
        queues_(queues),
        depth_(depth),
        payload_bytes_(payload_bytes) {}

  // Advises the top `entries` entries of every queue; sets huge_entries_
  // and huge_note_.
  void AdviseHugeEntries(uint32_t entries);

  uint8_t* const base_;
  const size_t bytes_;
  const uint32_t queues_;
  const uint32_t depth_;
  const uint32_t payload_bytes_;
  uint32_t huge_entries_ = 0;
  std::string huge_note_;
  std::unique_ptr<HugePromotion> promotion_;
};

}  // namespace pvdisk::fuse::channel
