// The frontend's pool of data pages ("persistent grants"): a fixed set of
// equally sized chunks of contiguous pages in the shared region, reused for
// every request. One ring request uses one chunk, so its data is contiguous.
// Free chunks are kept LIFO so a hot subset is reused (blkif.h's advice).
// Not thread-safe: the owning queue's lock protects it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace pvdisk::transport {

class ChunkPool {
 public:
  ChunkPool(uint32_t chunk_count, uint32_t pages_per_chunk);

  // A free chunk, or nullopt when all are in use.
  std::optional<uint32_t> Allocate();
  // REQUIRES: `chunk` came from Allocate() and was not freed since.
  void Free(uint32_t chunk);

  uint32_t FirstPage(uint32_t chunk) const { return chunk * pages_per_chunk_; }
  uint32_t pages_per_chunk() const { return pages_per_chunk_; }
  uint32_t chunk_count() const { return chunk_count_; }
  uint32_t free_count() const { return static_cast<uint32_t>(free_.size()); }

 private:
  uint32_t chunk_count_;
  uint32_t pages_per_chunk_;
  std::vector<uint32_t> free_;
};

}  // namespace pvdisk::transport
