// What `pvdisk info` reports of an image: each layer of its backing chain,
// top first, with its format and what its metadata says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "image/qcow2/snapshot_table.h"

namespace pvdisk::image::qcow2 {

struct LayerInfo {
  std::string path;
  std::string format;         // "raw" or "qcow2"
  uint64_t virtual_size = 0;  // bytes
  uint64_t file_bytes = 0;    // the file's size
  uint64_t disk_bytes = 0;    // what the file takes on its file system
  // qcow2 only:
  uint32_t version = 0;
  uint64_t cluster_size = 0;
  uint32_t refcount_bits = 0;
  uint64_t allocated_bytes = 0;     // virtual bytes this layer's clusters hold
  std::string features;             // set feature bits, by name
  std::string backing_file;         // as stored
  std::string backing_format;       // as stored
  std::vector<Snapshot> snapshots;  // internal snapshots, as stored
};

absl::StatusOr<std::vector<LayerInfo>> DescribeImage(const std::string& path);

}  // namespace pvdisk::image::qcow2
