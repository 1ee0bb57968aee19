#include "transport/chunk_pool.h"

namespace pvdisk::transport {

ChunkPool::ChunkPool(uint32_t chunk_count, uint32_t pages_per_chunk)
    : chunk_count_(chunk_count), pages_per_chunk_(pages_per_chunk) {
  free_.reserve(chunk_count);
  // Pushed in reverse so that chunk 0 is handed out first.
  for (uint32_t c = chunk_count; c > 0; --c) free_.push_back(c - 1);
}

std::optional<uint32_t> ChunkPool::Allocate() {
  if (free_.empty()) return std::nullopt;
  uint32_t chunk = free_.back();
  free_.pop_back();
  return chunk;
}

void ChunkPool::Free(uint32_t chunk) { free_.push_back(chunk); }

}  // namespace pvdisk::transport
