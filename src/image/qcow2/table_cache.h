// TableCache: metadata tables (L2 tables, refcount blocks) read from an
// image, kept by host offset, shared by every user of the image and
// internally locked. Least recently used tables go first once it holds
// `capacity` tables. It is write-through: whoever changes a cached table
// also writes the change to the file (a WritePlan, metadata_write.h), so an
// evicted table is never dirty and eviction needs no I/O.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/functional/function_ref.h"

namespace pvdisk::image::qcow2 {

class TableCache {
 public:
  // `capacity` tables (at least 1) of `table_bytes` each.
  TableCache(size_t capacity, size_t table_bytes);

  // The 8-byte big-endian entry `index` of the table at `offset`, if that
  // table is cached. Counts a hit or a miss.
  std::optional<uint64_t> Entry64(uint64_t offset, uint64_t index);
  // Runs `fn` on the cached table at `offset` (under the lock; `fn` must
  // not call back into the cache) and returns true, or returns false if it
  // is not cached. Counts a hit or a miss.
  bool Access(uint64_t offset, absl::FunctionRef<void(std::span<uint8_t>)> fn);
  // Adds (or replaces) the table at `offset`; `table` has table_bytes().
  void Insert(uint64_t offset, std::vector<uint8_t> table);
  void Erase(uint64_t offset);

  size_t table_bytes() const { return table_bytes_; }
  size_t capacity() const { return capacity_; }
  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Slot {
    std::vector<uint8_t> table;
    std::list<uint64_t>::iterator lru;  // position in lru_
  };
  // Moves the slot to the front of lru_; `mutex_` held.
  Slot* Touch(uint64_t offset);

  const size_t capacity_;
  const size_t table_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Slot> slots_;
  std::list<uint64_t> lru_;  // most recently used first
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace pvdisk::image::qcow2
