// Rebuilds a disk image at a point of its write log: applies the log's
// first entries, in order, to a copy of the image as it was when the log
// began (what `pvdisk replay` does).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "io/write_log_reader.h"

namespace pvdisk::io {

// Applies index.entries[0, count) of the log at `log_path` to the image
// file `image_path` (which must exist): writes their data, discards by
// punching holes (zeros where the file system cannot), flushes and marks
// change nothing; then syncs the image. Every entry is checked to lie
// within the image before anything is written: InvalidArgument naming the
// first that does not, with the image unchanged.
absl::Status ReplayWriteLog(const std::string& log_path,
                            const WriteLogIndex& index, uint64_t count,
                            const std::string& image_path);

}  // namespace pvdisk::io
