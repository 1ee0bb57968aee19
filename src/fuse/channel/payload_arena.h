// PayloadArena: the payload buffers of every FUSE uring entry, in one
// mapping that the disks' queues may grant to their backends directly
// (transport/lent_memory.h). A READ of whole sectors is then read by the
// backend straight into the entry's payload, from which the kernel copies
// it to the caller; a WRITE's data is written from the payload the kernel
// copied it into. pvdisk copies neither (counted in `zero_copy_ios`).
//
// Queue q's entry e has the payload_bytes at
// base + (q * depth + e) * payload_bytes. Anonymous memory: only the pages
// a request touches become resident, and the kernel reuses the entry
// committed last first, so the arena costs address space, not memory.
// It must outlive the channel and every disk that lends it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "transport/lent_memory.h"

namespace pvdisk::fuse::channel {

class PayloadArena {
 public:
  // REQUIRES: payload_bytes is a multiple of 4096.
  static absl::StatusOr<std::unique_ptr<PayloadArena>> Create(
      uint32_t queues, uint32_t depth, uint32_t payload_bytes);
  ~PayloadArena();
  PayloadArena(const PayloadArena&) = delete;
  PayloadArena& operator=(const PayloadArena&) = delete;

  // The payload buffers of queue `qid`: depth * payload_bytes bytes.
  uint8_t* QueueBase(uint32_t qid) const {
    return base_ + size_t{qid} * depth_ * payload_bytes_;
  }
  uint32_t queues() const { return queues_; }
  uint32_t depth() const { return depth_; }
  uint32_t payload_bytes() const { return payload_bytes_; }
  transport::LentMemory lent() const { return {base_, bytes_}; }

 private:
  PayloadArena(uint8_t* base, size_t bytes, uint32_t queues, uint32_t depth,
               uint32_t payload_bytes)
      : base_(base),
        bytes_(bytes),
        queues_(queues),
        depth_(depth),
        payload_bytes_(payload_bytes) {}

  uint8_t* const base_;
  const size_t bytes_;
  const uint32_t queues_;
  const uint32_t depth_;
  const uint32_t payload_bytes_;
};

}  // namespace pvdisk::fuse::channel
