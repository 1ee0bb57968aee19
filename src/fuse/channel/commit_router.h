// CommitRouter: where a FUSE uring reply is committed, and when.
//
// A reply is committed with a COMMIT_AND_FETCH on the ring of the thread
// that holds the entry (UringEntry::holder), which returns the reply and
// re-arms the entry in one command.
//   - Made on the holder's own thread (synchronous handlers, the inline
//     placement's): a local commit, batched into the thread's next
//     io_uring_enter; one that carries kCommitAtOnceBytes or more goes at
//     once. With spreading at depth, it may go to another queue thread
//     instead (spread_policy.h).
//   - Made on another thread (a backend or completion thread): the reply is
//     in the entry's own buffers already (the entry is the replier's until
//     committed); the entry goes on the holder's locked commit list and the
//     holder is woken through its eventfd, only if no wake-up is pending.
// Commits go to the kernel in index order (Flush).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fuse/channel/queue_thread.h"

namespace pvdisk::fuse::channel {

// A reply that carries this much data is committed at once, not at the end
// of the round. Why: a clump of large READ completions committed together
// reaches the reader together, and it sends its next requests together;
// sequential neighbours among them merge in the block layer, and the device
// then holds one large request where it could hold several. Measured with
// fio 128 KiB sequential reads at iodepth 8 on vda: committed at the end of
// the round, the device saw ~490 KiB requests at a depth of 1.1 (2.8 merges
// per request); committed at once, ~170 KiB at a depth of 3.4, and 1.2-1.6x
// the IOPS. 32 KiB reads at iodepth 16 did not move either way
// (docs/perf/compare-2026-12-04-commit-at-once.md).
inline constexpr size_t kCommitAtOnceBytes = 64 << 10;

class CommitRouter {
 public:
  // `threads`: the channel's queue threads (the vector is filled before
  // any reply and emptied after the last). `spread`: --fuse-spread as it
  // applies. `stop_taking`: set once no request is taken any more (then
  // entries stay where they are).
  CommitRouter(const std::vector<std::unique_ptr<QueueThread>>& threads,
               bool spread, const std::atomic<bool>& stop_taking)
      : threads_(threads), spread_(spread), stop_taking_(stop_taking) {}

  // The reply to entry `index` of queue `owner`, carrying `bytes` of data,
  // is written; `current` is the queue thread that made it (null: none).
  void Route(const QueueThread* current, UringQueue& owner, uint32_t index,
             size_t bytes);

  // On `thread`: queues its local commits on its ring, in index order. Why:
  // the kernel puts an entry committed back at the head of the queue's list
  // of free entries and takes new requests from there, so the entry
  // committed last is reused first. Committing each batch in index order
  // keeps the top entries, those in huge pages (payload_arena.h), on top: a
  // queue that holds few requests at once keeps to them even after a deeper
  // burst has cycled through the others. Committed in the order answered, a
  // 128 KiB job at depth 8 after a 4 KiB job at depth 32 kept the burst's
  // last entries (docs/perf/compare-2026-12-02-index-order-commits-*.md).
  void Flush(QueueThread& thread);
  // On `thread`, once woken: takes the replies made on other threads and
  // the entries moved in. With `close` (the thread is about to exit), it
  // refuses further entries moved in.
  void TakeRemote(QueueThread& thread);
  void TakeMovedIn(QueueThread& thread, bool close);

 private:
  UringEntry& EntryOf(uint64_t tag) const {
    return threads_[EntryQueue(tag)]->queue.entry(EntryIndex(tag));
  }

  const std::vector<std::unique_ptr<QueueThread>>& threads_;
  const bool spread_;
  const std::atomic<bool>& stop_taking_;
};

}  // namespace pvdisk::fuse::channel
