// DataArea: the device side's reach into a queue's data area by byte offset
// (the protocols' "addresses"), through its GrantMapper. For the small
// structures a device ring reads out of the data area (tables, headers,
// range lists) and writes into it (status bytes): each copy maps the pages it
// touches and unmaps them again, so that per-request grants stay per request.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/grant_mapper.h"

namespace pvdisk::transport {

class DataArea {
 public:
  // `grants` reaches pages 0 .. data_pages - 1 and outlives the area.
  DataArea(GrantMapper* grants, uint32_t data_pages);

  // Whether [addr, addr + len) lies inside the data area.
  bool Inside(uint64_t addr, uint64_t len) const {
    return addr <= bytes_ && len <= bytes_ - addr;
  }
  // Copies `len` bytes at offset `addr` into `to` (or from `from`). False if
  // mapping failed. REQUIRES: Inside(addr, len).
  bool CopyFrom(uint64_t addr, void* to, size_t len);
  bool CopyTo(uint64_t addr, const void* from, size_t len);

  uint64_t bytes() const { return bytes_; }

 private:
  GrantMapper* grants_;
  uint64_t bytes_;
};

}  // namespace pvdisk::transport
