#include "fuse/channel/payload_arena.h"

#include <sys/mman.h>

#include <cerrno>

#include "base/errno_status.h"

namespace pvdisk::fuse::channel {

absl::StatusOr<std::unique_ptr<PayloadArena>> PayloadArena::Create(
    uint32_t queues, uint32_t depth, uint32_t payload_bytes) {
  if (queues == 0 || depth == 0 || payload_bytes == 0 ||
      payload_bytes % 4096 != 0) {
    return absl::InvalidArgumentError(
        "FUSE payload arena: queues, depth and a payload of whole pages "
        "are needed");
  }
  const size_t bytes = size_t{queues} * depth * payload_bytes;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    return ErrnoError(errno, "mmap of the FUSE payload buffers");
  }
  return std::unique_ptr<PayloadArena>(new PayloadArena(
      static_cast<uint8_t*>(memory), bytes, queues, depth, payload_bytes));
}

PayloadArena::~PayloadArena() { munmap(base_, bytes_); }

}  // namespace pvdisk::fuse::channel
