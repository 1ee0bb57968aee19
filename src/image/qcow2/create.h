// Creating an empty qcow2 image: the header cluster (with the backing file
// name and format), one refcount table, the refcount blocks that count the
// metadata, and a zeroed L1 table covering the virtual size; no L2 table
// and no data cluster. Everything is checked before the file is made, and
// a failure while writing removes the file.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pvdisk::image::qcow2 {

struct CreateOptions {
  uint64_t size = 0;  // virtual bytes; 0 with a backing file: its size
  uint64_t cluster_size = 65536;  // a power of two, 512 B .. 2 MiB
  uint32_t version = 3;
  // As it is stored in the header: resolved against the new image's
  // directory when relative (chain.h); it must open as an image.
  std::string backing;
  bool force = false;  // replace an existing regular file
  // Extended L2 entries (subclusters.h): version 3 and clusters of at
  // least 16 KiB.
  bool extended_l2 = false;
};

// Refusals of what the caller named: InvalidArgument (bad size, cluster
// size, backing chain), AlreadyExists, NotFound (folder or backing file).
absl::Status CreateQcow2(const std::string& path, CreateOptions options);

}  // namespace pvdisk::image::qcow2
