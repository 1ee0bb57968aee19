// Whole-range pread and pwrite for the control path of the qcow2 core
// (qcow2_file, chain, create): they retry short transfers and EINTR.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"

namespace pvdisk::image::qcow2 {

// Reads `out.size()` bytes at `offset`; bytes past the end of the file
// read as zeros. `name` names the file in errors.
absl::Status ReadFully(int fd, uint64_t offset, std::span<uint8_t> out,
                       const std::string& name);
// Writes all of `data` at `offset`.
absl::Status WriteFully(int fd, uint64_t offset, std::span<const uint8_t> data,
                        const std::string& name);

}  // namespace pvdisk::image::qcow2
