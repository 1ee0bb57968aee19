// Test helpers for the virtio ring tests: a split virtqueue of `size` entries
// in a shared region (the ring at offset 0, Protocol::RingBytes(size) long,
// the data area after it), with the shared structures as the driver's
// mapping shows them at the offsets virtio::LayoutFor() gives; and a
// GrantMapper that fails the test if the device asks for a page outside the
// data area or forgets to unmap one.
#pragma once

#include <cstdint>
#include <functional>

#include "gtest/gtest.h"
#include "ring_memory.h"
#include "transport/grant_mapper.h"
#include "transport/virtio/format.h"
#include "transport/virtio/protocol.h"

namespace pvdisk::transport::testing {

class VirtioMemory : public RingMemory {
 public:
  VirtioMemory(uint32_t size, uint32_t data_pages)
      : RingMemory(size, data_pages, VirtioProtocol().RingBytes(size)),
        size_(size),
        layout_(virtio::LayoutFor(size)) {}

  const virtio::RingLayout& layout() const { return layout_; }

  // Descriptor `i` of the table (not masked: i < size).
  virtio::Desc* desc(uint32_t i) const {
    return reinterpret_cast<virtio::Desc*>(front_ring() + layout_.desc) + i;
  }
  // The available ring: flags, idx, ring[size], used_event.
  uint16_t& avail_flags() const { return U16(layout_.avail); }
  uint16_t& avail_idx() const { return U16(layout_.avail + 2); }
  uint16_t& avail_ring(uint32_t i) const {
    return U16(layout_.avail + 4 + 2 * size_t{i});
  }
  uint16_t& used_event() const { return avail_ring(size_); }
  // The used ring: flags, idx, ring[size] of {id, len}, avail_event.
  uint16_t& used_flags() const { return U16(layout_.used); }
  uint16_t& used_idx() const { return U16(layout_.used + 2); }
  virtio::UsedElem& used_ring(uint32_t i) const {
    return *reinterpret_cast<virtio::UsedElem*>(front_ring() + layout_.used +
                                                4 + 8 * size_t{i});
  }
  uint16_t& avail_event() const {
    return U16(layout_.used + 4 + 8 * size_t{size_});
  }
  // The used entry for used index `index` (masked).
  virtio::UsedElem used_entry(uint16_t index) const {
    return used_ring(index & (size_ - 1));
  }

 private:
  uint16_t& U16(size_t offset) const {
    return *reinterpret_cast<uint16_t*>(front_ring() + offset);
  }

  uint32_t size_;
  virtio::RingLayout layout_;
};

// Wraps a GrantMapper: every MapPages() must stay inside the data area's
// `data_pages` pages, and every mapping must be unmapped. `on_map`, if set,
// runs before each mapping, e.g. to change shared memory under the device's
// feet.
class CheckedGrants final : public GrantMapper {
 public:
  CheckedGrants(GrantMapper* inner, uint32_t data_pages)
      : inner_(inner), data_pages_(data_pages) {}
  ~CheckedGrants() override {
    EXPECT_EQ(outstanding_, 0) << "mappings never unmapped";
  }

  bool MapPages(uint32_t first, uint32_t count, PageMapping* out) override {
    ++maps_;
    EXPECT_GT(count, 0u);
    EXPECT_LE(uint64_t{first} + count, data_pages_)
        << "the device asked for pages " << first << "+" << count << " of a "
        << data_pages_ << "-page data area";
    if (count == 0 || uint64_t{first} + count > data_pages_) {
      ++refused_;
      return false;
    }
    if (on_map) on_map(first, count);
    if (!inner_->MapPages(first, count, out)) return false;
    ++outstanding_;
    return true;
  }
  void UnmapPages(const PageMapping& mapping) override {
    --outstanding_;
    inner_->UnmapPages(mapping);
  }
  bool persistent() const override { return inner_->persistent(); }

  int maps() const { return maps_; }
  int refused() const { return refused_; }
  int outstanding() const { return outstanding_; }

  std::function<void(uint32_t first, uint32_t count)> on_map;

 private:
  GrantMapper* inner_;
  uint32_t data_pages_;
  int maps_ = 0;
  int refused_ = 0;
  int outstanding_ = 0;
};

}  // namespace pvdisk::transport::testing
