#include "fuse/channel/fixed_buffer_table.h"

#include <algorithm>
#include <bit>

namespace pvdisk::fuse::channel {
namespace {

// The smallest payload registration: one page.
constexpr uint32_t kMinPayloadBytes = 4096;

}  // namespace

FixedBufferTable::FixedBufferTable(io_uring* ring, const PayloadArena* arena)
    : ring_(ring), arena_(arena) {
  if (arena_ != nullptr) {
    const uint64_t entries = uint64_t{arena_->queues()} * arena_->depth();
    entry_slots_ = static_cast<unsigned>(
        std::min<uint64_t>(entries, kMaxSlots - kEngineSlots));
  }
}

bool FixedBufferTable::EnsureTable() {
  if (table_made_) return true;
  if (table_failed_) return false;
  // Sparse: every slot empty until registered, so the size costs nothing
  // but the kernel's table of pointers.
  if (io_uring_register_buffers_sparse(ring_, kEngineSlots + entry_slots_) <
      0) {
    table_failed_ = true;
    return false;
  }
  table_made_ = true;
  registered_.assign(entry_slots_, 0);
  return true;
}

int FixedBufferTable::AddEngineBuffers(const std::vector<iovec>& buffers) {
  if (!EnsureTable()) return -1;
  if (buffers.size() > kEngineSlots - engine_slots_used_) return -1;
  if (io_uring_register_buffers_update_tag(
          ring_, engine_slots_used_, buffers.data(), nullptr,
          static_cast<unsigned>(buffers.size())) < 0) {
    return -1;
  }
  const int base = static_cast<int>(engine_slots_used_);
  engine_slots_used_ += static_cast<unsigned>(buffers.size());
  return base;
}

int FixedBufferTable::ForPayload(const void* data, size_t length) {
  if (arena_ == nullptr || payload_refused_ || length == 0 ||
      length > kLargestPayloadIo) {
    return -1;
  }
  const transport::LentMemory lent = arena_->lent();
  const auto at = reinterpret_cast<uintptr_t>(data);
  const auto begin = reinterpret_cast<uintptr_t>(lent.base);
  if (at < begin || at - begin >= lent.bytes) return -1;
  const uint32_t payload_bytes = arena_->payload_bytes();
  const uint64_t entry = (at - begin) / payload_bytes;
  const uint64_t reach = (at - begin) % payload_bytes + length;
  if (reach > payload_bytes || entry >= entry_slots_) return -1;
  const HugePromotion* promotion = arena_->promotion();
  if (promotion != nullptr && !promotion->Pinnable(entry)) return -1;
  if (!EnsureTable()) return -1;
  const unsigned slot = kEngineSlots + static_cast<unsigned>(entry);
  if (registered_[entry] < reach) {
    // A power of two: an entry that serves growing requests is registered
    // a few times at most, not once per new size.
    const uint32_t bytes = std::min<uint32_t>(
        payload_bytes, std::bit_ceil(std::max<uint32_t>(
                           static_cast<uint32_t>(reach), kMinPayloadBytes)));
    iovec buffer{lent.base + entry * payload_bytes, bytes};
    // Replacing a registration is safe with I/O in flight on the old one:
    // the kernel keeps the old buffer until those requests complete.
    if (io_uring_register_buffers_update_tag(ring_, slot, &buffer, nullptr, 1) <
        0) {
      payload_refused_ = true;
      return -1;
    }
    registered_[entry] = bytes;
    ++payload_registrations_;
  }
  return static_cast<int>(slot);
}

void FixedBufferTable::DropUnpinnable() {
  const HugePromotion* promotion =
      arena_ != nullptr ? arena_->promotion() : nullptr;
  if (promotion == nullptr || !table_made_) return;
  const uint64_t generation = promotion->generation();
  if (generation == promotion_seen_) return;
  promotion_seen_ = generation;
  for (unsigned entry = 0; entry < entry_slots_; ++entry) {
    if (registered_[entry] == 0 || promotion->Pinnable(entry)) continue;
    // An empty iovec empties the slot (the call returns how many slots it
    // updated); I/O in flight keeps the old buffer (and its pin) until it
    // completes.
    iovec none{nullptr, 0};
    if (io_uring_register_buffers_update_tag(ring_, kEngineSlots + entry, &none,
                                             nullptr, 1) == 1) {
      registered_[entry] = 0;
    }
  }
}

}  // namespace pvdisk::fuse::channel
