// Qcow2Metadata: what one qcow2 file's metadata says, held in memory and
// shared by every user of the image: the header, the L1 table and the
// refcount table (read whole when the image opens), which of their entries
// are unusable and why, where all metadata lies (layout.h), and the caches
// of L2 tables and refcount blocks (table_cache.h).
//
// Built from bytes alone (BuildQcow2Metadata), never from a descriptor: the
// code that reads the file, synchronously (qcow2_file.h) or through an
// engine, supplies the bytes, so the same logic serves both.
//
// Concurrency: reads (mapping.h) may run from several threads; the caches
// are locked. Changes (allocator.h, update.h) are made by one thread at a
// time, which the owner serializes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "image/qcow2/header.h"
#include "image/qcow2/layout.h"
#include "image/qcow2/table_cache.h"

namespace pvdisk::image::qcow2 {

// Why an L1 or refcount table entry cannot be used; the ranges it maps get
// an error, the rest of the image stays usable.
enum class EntryFault : uint8_t {
  kNone,
  kReservedBits,  // bits the spec reserves are set
  kUnaligned,     // not a multiple of the cluster size
  kPastEnd,       // the table does not fit inside the file
  kIntoMetadata,  // it overlaps other metadata (or another table)
};
const char* EntryFaultName(EntryFault fault);

struct Qcow2Metadata {
  Qcow2Metadata(size_t l2_cache_tables, size_t refblock_cache_tables,
                size_t cluster_bytes)
      : l2_cache(l2_cache_tables, cluster_bytes),
        refblock_cache(refblock_cache_tables, cluster_bytes) {}

  std::string name;  // the file, for messages
  Qcow2Header header;
  // The file's size: grows as clusters are appended (the owner raises it
  // once a write past the end is done).
  uint64_t file_size = 0;
  std::vector<uint64_t> l1;  // raw entries, l1_size of them
  std::vector<EntryFault> l1_fault;
  std::vector<uint64_t> refcount_table;  // raw entries
  std::vector<EntryFault> refcount_table_fault;
  MetadataLayout layout;
  TableCache l2_cache;        // by host offset of the L2 table
  TableCache refblock_cache;  // by host offset of the refcount block

  uint64_t cluster_size() const { return header.cluster_size(); }
  // The L2 table of L1 entry `index` (0: none), if its entry is usable.
  uint64_t L2TableOffset(uint64_t index) const;
};

// Default cache sizes: 1024 L2 tables map 64 GiB of a 64 KiB-cluster image
// (64 MiB of memory); 64 refcount blocks.
inline constexpr size_t kDefaultL2CacheTables = 1024;
inline constexpr size_t kDefaultRefblockCacheTables = 64;

// Builds the metadata from the parsed header, the file's size and the bytes
// of the L1 table (l1_size * 8) and refcount table
// (refcount_table_clusters clusters). Refuses a layout CheckQcow2Layout
// refuses; marks unusable entries of either table (EntryFault) without
// refusing the image.
absl::StatusOr<std::unique_ptr<Qcow2Metadata>> BuildQcow2Metadata(
    const Qcow2Header& header, uint64_t file_size,
    std::span<const uint8_t> l1_bytes, std::span<const uint8_t> refcount_bytes,
    const std::string& image, size_t l2_cache_tables = kDefaultL2CacheTables,
    size_t refblock_cache_tables = kDefaultRefblockCacheTables);

}  // namespace pvdisk::image::qcow2
