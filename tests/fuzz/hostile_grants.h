// HostileGrants: the GrantMapper the ring fuzzers give a device ring. It
// behaves like per-request grants, strictly:
// - every mapping is a fresh heap copy of exactly the pages asked for, so
//   AddressSanitizer reports any access past them (a persistent mapping
//   would let an overrun into the next page go unnoticed);
// - asking for a page outside the data area, or for zero pages, is a
//   finding: a device ring validates page numbers before it maps them;
// - every mapping must be unmapped before the ring call returns (Balanced());
// - the fuzzer can arm a "race": the next MapPages() first writes a byte of
//   the ring's frontend-written part (request slots, descriptor table,
//   available ring), as a frontend writing concurrently would, so that a
//   device that reads a shared slot or descriptor twice sees it change.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "fuzz_input.h"
#include "transport/grant_mapper.h"

namespace pvdisk::fuzz {

inline constexpr size_t kPageBytes = 4096;

// A zeroed data area of `pages` pages (at most 64). One buffer serves every
// run: allocating a fresh one per run costs more than the run. Overruns are
// still caught, since the device reaches data only through HostileGrants'
// exact-size copies.
inline std::span<uint8_t> FreshDataArea(uint32_t pages) {
  static constexpr uint32_t kMaxPages = 64;
  static std::vector<uint8_t> buffer(kMaxPages * kPageBytes);
  FUZZ_CHECK(pages <= kMaxPages, "a data area larger than the buffer");
  std::memset(buffer.data(), 0, size_t{pages} * kPageBytes);
  return std::span<uint8_t>(buffer.data(), size_t{pages} * kPageBytes);
}

class HostileGrants final : public transport::GrantMapper {
 public:
  // `data` holds `pages` pages; `racy` (`racy_bytes`) is the part of the
  // shared ring the frontend writes requests into.
  HostileGrants(uint8_t* data, uint32_t pages, uint8_t* racy, size_t racy_bytes)
      : data_(data), pages_(pages), racy_(racy), racy_bytes_(racy_bytes) {}
  ~HostileGrants() override {
    for (const Copy& copy : copies_) delete[] copy.address;
  }
  HostileGrants(const HostileGrants&) = delete;
  HostileGrants& operator=(const HostileGrants&) = delete;

  bool MapPages(uint32_t first, uint32_t count,
                transport::PageMapping* out) override {
    FUZZ_CHECK(count > 0, "the device mapped zero pages");
    FUZZ_CHECK(uint64_t{first} + count <= pages_,
               "the device mapped pages outside the data area");
    if (race_armed_) {
      race_armed_ = false;
      racy_[race_offset_ % racy_bytes_] = race_value_;
    }
    auto* copy = new uint8_t[size_t{count} * kPageBytes];
    std::memcpy(copy, data_ + size_t{first} * kPageBytes,
                size_t{count} * kPageBytes);
    copies_.push_back(Copy{copy, first, count});
    *out = transport::PageMapping{copy, count, true};
    return true;
  }

  // Writes the pages back, as the shared mapping would have shown the
  // device's writes, and frees the copy.
  void UnmapPages(const transport::PageMapping& mapping) override {
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (copies_[i].address != mapping.address) continue;
      FUZZ_CHECK(copies_[i].pages == mapping.pages,
                 "unmapped with another page count than mapped");
      std::memcpy(data_ + size_t{copies_[i].first} * kPageBytes,
                  copies_[i].address, size_t{copies_[i].pages} * kPageBytes);
      delete[] copies_[i].address;
      copies_.erase(copies_.begin() + static_cast<long>(i));
      return;
    }
    FUZZ_CHECK(false, "unmapped a mapping that is not mapped");
  }

  bool persistent() const override { return false; }

  void ArmRace(uint32_t offset, uint8_t value) {
    race_armed_ = true;
    race_offset_ = offset;
    race_value_ = value;
  }

  // True when every mapping was unmapped.
  bool Balanced() const { return copies_.empty(); }

 private:
  struct Copy {
    uint8_t* address;
    uint32_t first;
    uint32_t pages;
  };

  uint8_t* data_;
  uint32_t pages_;
  uint8_t* racy_;
  size_t racy_bytes_;
  std::vector<Copy> copies_;
  bool race_armed_ = false;
  uint32_t race_offset_ = 0;
  uint8_t race_value_ = 0;
};

}  // namespace pvdisk::fuzz
