// What both virtio ring fuzzers (split and packed) read the same way: the
// device's limits from the configuration, and the driver's writes into the
// data area (headers, indirect tables, discard segments). One layout, so
// that make_seeds.py builds both targets' configurations with one function.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "fuzz_input.h"
#include "transport/device_ring.h"

namespace pvdisk::fuzz {

// u8 data pages - 1 (of at most 64), u64 disk sectors, u16 max segments - 1
// (of at most 4096), u8 read-only, u8 serial length (mod 32), serial bytes.
inline transport::DeviceLimits ReadVirtioLimits(FuzzInput& in) {
  transport::DeviceLimits limits;
  limits.data_pages = 1 + in.U8() % 64;
  limits.disk_sectors = in.U64();
  limits.max_segments = 1 + in.U16() % 4096;
  limits.read_only = in.U8() & 1;
  std::string serial(in.U8() % 32, '\0');
  in.Bytes(serial.data(), serial.size());
  limits.serial = serial;
  return limits;
}

// u32 offset, u8 length, bytes: written into `data` at offset mod its size,
// cut at its end.
inline void WriteVirtioData(FuzzInput& in, std::span<uint8_t> data) {
  uint64_t offset = in.U32() % data.size();
  size_t length = in.U8();
  if (length > data.size() - offset) length = data.size() - offset;
  in.Bytes(&data[offset], length);
}

}  // namespace pvdisk::fuzz
