// The headers of the image formats a reader could take a raw disk's first
// sector for. A raw image whose format was probed, not given, must never
// come to start with one: the next open would probe it as that format, and
// a qcow2 header names any host file as its backing file. So such a disk
// refuses a write that would put one there (QEMU's raw driver refuses the
// same writes when it probed the format).
//
// The formats: those QEMU probes by the first sector's content: qcow and
// qcow2 ("QFI\xfb"), VMDK (sparse "KDMV", COW "COWD", a text descriptor),
// VDI (its signature at byte 64), VHDX ("vhdxfile"), VPC ("conectix"), QED
// ("QED\0"), LUKS ("LUKS\xba\xbe"), Bochs and Parallels (their signature
// strings) and cloop (its shell header).
#pragma once

#include <cstdint>
#include <span>

namespace pvdisk::image {

// The bytes a header must lie in: one sector.
inline constexpr size_t kImageHeaderProbeBytes = 512;

// The name of the format whose header `first_sector` (the disk's first
// kImageHeaderProbeBytes bytes; shorter only when the disk is) starts
// with, or null if none.
const char* ImageHeaderIn(std::span<const uint8_t> first_sector);

// The same as a plain predicate on one whole sector, for the queue's check
// of writes to sector 0 (transport::QueuePolicy::refuse_first_sector).
bool HoldsImageHeader(const uint8_t* sector);

}  // namespace pvdisk::image
