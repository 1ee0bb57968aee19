// Test helper: one shared region holding a ring of `slots` slots (blkif's
// unless told the ring's size) and `data_pages` data pages after it, mapped
// twice (frontend and backend), as transport::Queue lays it out.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "transport/blkif/format.h"
#include "transport/ring_request.h"
#include "transport/shared_region.h"

namespace pvdisk::transport::testing {

class RingMemory {
 public:
  RingMemory(uint32_t slots, uint32_t data_pages)
      : RingMemory(slots, data_pages, blkif::RingBytes(slots)) {}

  // A ring of `ring_bytes` bytes (a multiple of 4096), for another
  // protocol's layout; header() and slot() are blkif's and do not apply.
  RingMemory(uint32_t slots, uint32_t data_pages, size_t ring_bytes)
      : slots_(slots), ring_bytes_(ring_bytes) {
    auto region = SharedRegion::Create(
        "pvdisk-ring-test",
        ring_bytes_ + size_t{data_pages} * blkif::kPageSize);
    EXPECT_TRUE(region.ok()) << region.status();
    if (!region.ok()) return;
    region_ = std::move(*region);
    auto front = region_->Map();
    auto back = region_->Map();
    EXPECT_TRUE(front.ok()) << front.status();
    EXPECT_TRUE(back.ok()) << back.status();
    if (!front.ok() || !back.ok()) return;
    front_ = std::move(*front);
    back_ = std::move(*back);
  }

  bool ok() const { return front_ != nullptr && back_ != nullptr; }
  uint32_t slots() const { return slots_; }

  uint8_t* front_ring() const { return front_->base(); }
  uint8_t* back_ring() const { return back_->base(); }
  uint8_t* front_data() const { return front_->base() + ring_bytes_; }
  uint8_t* back_data() const { return back_->base() + ring_bytes_; }
  size_t data_bytes() const { return back_->size() - ring_bytes_; }
  // The region itself and where its data pages start, for per-request
  // grants.
  const SharedRegion* region() const { return region_.get(); }
  size_t ring_bytes() const { return ring_bytes_; }

  // The shared structures as the frontend's mapping shows them.
  blkif::SharedRingHeader* header() const {
    return reinterpret_cast<blkif::SharedRingHeader*>(front_ring());
  }
  blkif::Slot* slot(uint32_t index) const {
    return reinterpret_cast<blkif::Slot*>(front_ring() +
                                          sizeof(blkif::SharedRingHeader)) +
           (index & (slots_ - 1));
  }

 private:
  uint32_t slots_;
  size_t ring_bytes_;
  std::unique_ptr<SharedRegion> region_;
  std::unique_ptr<RegionMapping> front_;
  std::unique_ptr<RegionMapping> back_;
};

// DataSegment has no operator==; compare and print these instead.
using SegmentTuple = std::array<uint32_t, 3>;

inline std::vector<SegmentTuple> Tuples(const DataSegment* segments,
                                        size_t count) {
  std::vector<SegmentTuple> tuples;
  for (size_t i = 0; i < count; ++i) {
    tuples.push_back(
        {segments[i].page, segments[i].first_sector, segments[i].last_sector});
  }
  return tuples;
}

inline std::vector<SegmentTuple> Tuples(
    const std::vector<DataSegment>& segments) {
  return Tuples(segments.data(), segments.size());
}

}  // namespace pvdisk::transport::testing
