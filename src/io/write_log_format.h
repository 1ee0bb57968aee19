// The on-disk layout of a write log (`--disk IMG,log=FILE`): the format of
// the kernel's dm-log-writes target (drivers/md/dm-log-writes.c), which
// xfstests' replay-log and QEMU's blklogwrites read and write too, so that
// their tools replay pvdisk's logs and pvdisk replays theirs.
//
// All numbers are little-endian. With S the log's sector size (bytes):
// - bytes [0, S): the superblock (WriteLogSuper), zero-padded to S;
// - then nr_entries entries, each one header sector (WriteLogEntry,
//   zero-padded to S; a mark's name follows the header inside that sector)
//   followed by nr_sectors * S bytes of the data written, except for
//   discards and marks, which carry no data sectors.
// `sector` and `nr_sectors` count S-byte sectors of the disk.
#pragma once

#include <cstdint>

namespace pvdisk::io {

inline constexpr uint64_t kWriteLogMagic = 0x6a736677736872ULL;
inline constexpr uint64_t kWriteLogVersion = 1;
// pvdisk's disks have 512-byte logical sectors; its logs use that size.
inline constexpr uint32_t kWriteLogSectorSize = 512;

// WriteLogEntry::flags.
inline constexpr uint64_t kLogFlush = 1 << 0;
inline constexpr uint64_t kLogFua = 1 << 1;
inline constexpr uint64_t kLogDiscard = 1 << 2;
inline constexpr uint64_t kLogMark = 1 << 3;
inline constexpr uint64_t kLogMetadata = 1 << 4;

// The first bytes of sector 0. Packed: the kernel's struct is 28 bytes of
// fields (its padding is never read).
struct __attribute__((packed)) WriteLogSuper {
  uint64_t magic;
  uint64_t version;
  uint64_t nr_entries;
  uint32_t sectorsize;
};
static_assert(sizeof(WriteLogSuper) == 28);

// The first bytes of an entry's header sector.
struct WriteLogEntry {
  uint64_t sector;
  uint64_t nr_sectors;
  uint64_t flags;
  // A mark's name length (the name follows this struct, in the same
  // sector); 0 for every other entry.
  uint64_t data_len;
};
static_assert(sizeof(WriteLogEntry) == 32);

// The longest mark name: the header sector less the header and a NUL, as
// the kernel truncates.
inline constexpr uint64_t kMaxMarkLength =
    kWriteLogSectorSize - sizeof(WriteLogEntry) - 1;

}  // namespace pvdisk::io
