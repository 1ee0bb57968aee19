// Reads a write log in dm-log-writes' format (write_log_format.h): the
// superblock and the index of its entries, checked against the file, so
// that a replay knows before it writes anything whether the log is whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pvdisk::io {

struct WriteLogRecord {
  uint64_t sector = 0;       // in sector_size units
  uint64_t nr_sectors = 0;   // in sector_size units
  uint64_t flags = 0;        // kLogFlush, kLogDiscard, ...
  std::string mark;          // a mark's name
  uint64_t data_offset = 0;  // where its data lies in the file
  uint64_t data_bytes = 0;   // 0 for discards, flushes and marks
};

struct WriteLogIndex {
  uint32_t sector_size = 0;
  std::vector<WriteLogRecord> entries;  // the superblock's nr_entries
};

// InvalidArgument naming the file and what is wrong with it: not a log
// (magic), a version other than 1, a sector size that is no power of two
// from 512 to 65536, an entry that ends beyond the file (truncated), or a
// mark name longer than its header sector. NotFound etc. if unreadable.
absl::StatusOr<WriteLogIndex> ReadWriteLogIndex(const std::string& path);

// "FLUSH|FUA" etc.; "-" for a plain write.
std::string WriteLogFlagNames(uint64_t flags);

}  // namespace pvdisk::io
