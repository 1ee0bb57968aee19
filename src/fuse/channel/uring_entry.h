// One entry of a FUSE uring queue (reference/fuse.md §3): a header buffer
// and a payload buffer that the kernel fills with a request, and the
// command (REGISTER, then COMMIT_AND_FETCH) that hands it back with the
// reply. And how a queue thread tells the completions on its ring apart.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "fuse/protocol/abi.h"

namespace pvdisk::fuse::channel {

enum class EntryState { kInKernel, kWithHandler, kParked, kDead };

struct UringEntry {
  abi::fuse_uring_req_header* header = nullptr;
  uint8_t* payload = nullptr;
  iovec iov[2];
  uint64_t commit_id = 0;
  uint32_t last_cmd = abi::kUringCmdRegister;
  EntryState state = EntryState::kInKernel;
  // The queue (by id) whose thread's ring holds the entry's command: that
  // thread takes its requests and commits its replies. Set with each
  // command (UringQueue::QueueCommand).
  uint32_t holder = 0;
  // What its request weighs (spread_policy.h), set when it is taken.
  uint32_t spread_units = 0;
};

// One fuse_uring_req_header, padded.
inline constexpr size_t kEntryHeaderBytes = 512;

// user_data on a queue thread's ring: a FUSE entry's EntryTag (below
// 2^32), the wake read's kWakeTag, or a companion's CQE (a lent tag, from
// bit io::RingLender::kSinkBits up).
inline constexpr uint64_t kWakeTag = uint64_t{1} << 32;

// An entry command's user_data, and the commit lists' entries: the entry's
// FUSE queue and index (queue depths and queue counts are below 2^16).
constexpr uint64_t EntryTag(uint32_t qid, uint32_t index) {
  return (uint64_t{qid} << 16) | index;
}
constexpr uint32_t EntryQueue(uint64_t tag) {
  return static_cast<uint32_t>(tag >> 16);
}
constexpr uint32_t EntryIndex(uint64_t tag) {
  return static_cast<uint32_t>(tag & 0xffff);
}

// The Session's reply slot for an entry.
constexpr uint64_t EntrySlot(uint32_t qid, uint32_t index) {
  return (uint64_t{qid} << 32) | index;
}
constexpr uint32_t SlotQueue(uint64_t slot) {
  return static_cast<uint32_t>(slot >> 32);
}
constexpr uint32_t SlotIndex(uint64_t slot) {
  return static_cast<uint32_t>(slot);
}

}  // namespace pvdisk::fuse::channel
