// QueueThread: what the thread that owns one FUSE uring queue has: the
// queue itself (uring_queue.h), the replies it has to commit
// (queue_commits.h), its companion (ring_companion.h) and its place in
// spreading (spread_policy.h). Made by the channel, one per possible CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>

#include "fuse/channel/queue_commits.h"
#include "fuse/channel/ring_companion.h"
#include "fuse/channel/uring_queue.h"

namespace pvdisk::fuse::channel {

struct QueueThread {
  explicit QueueThread(uint32_t qid) : queue(qid) {}

  // Declared before `queue`, so destroyed after its ring is closed: the
  // companion's armed reads may point into it until then.
  std::unique_ptr<RingCompanion> companion;
  bool companion_attached = false;
  UringQueue queue;
  QueueCommits commits;
  uint32_t spread_turn = 0;       // SpreadTarget's turn (owner thread only)
  bool stop_taking_seen = false;  // counted by the channel (owner only)
  std::thread thread;
};

}  // namespace pvdisk::fuse::channel
