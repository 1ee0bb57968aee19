#include "fuse/channel/commit_router.h"

#include <algorithm>

#include "fuse/channel/spread_policy.h"

namespace pvdisk::fuse::channel {

void CommitRouter::Route(const QueueThread* current, UringQueue& owner,
                         uint32_t index, size_t bytes) {
  UringEntry& entry = owner.entry(index);
  QueueThread& holder = *threads_[entry.holder];
  const uint64_t tag = EntryTag(owner.qid(), index);
  if (current != &holder) {
    holder.commits.AddRemote(tag);
    holder.queue.Wake();
    return;
  }
  if (spread_ && !stop_taking_.load(std::memory_order_relaxed)) {
    SpreadState state;
    state.queues = static_cast<uint32_t>(threads_.size());
    state.holder = holder.queue.qid();
    state.owner = owner.qid();
    state.with_handler = holder.commits.with_handler();
    state.held_units = holder.commits.held_units();
    const uint32_t to = SpreadTarget(state, &holder.spread_turn);
    if (to != kKeep) {
      const uint32_t units = entry.spread_units;  // before the entry goes
      QueueThread& target = *threads_[to];
      if (target.commits.MoveIn(tag)) {
        holder.commits.Release(units);
        target.queue.Wake();
        return;
      }
    }
  }
  holder.commits.local().push_back(tag);
  if (bytes >= kCommitAtOnceBytes) {
    Flush(holder);
    io_uring_submit(holder.queue.uring());
  }
}

void CommitRouter::Flush(QueueThread& thread) {
  std::vector<uint64_t>& local = thread.commits.local();
  std::sort(local.begin(), local.end());
  for (uint64_t tag : local) {
    thread.commits.Release(EntryOf(tag).spread_units);
    thread.queue.QueueCommand(threads_[EntryQueue(tag)]->queue, EntryIndex(tag),
                              abi::kUringCmdCommitAndFetch);
  }
  local.clear();
}

void CommitRouter::TakeRemote(QueueThread& thread) {
  thread.queue.WakeTaken();
  thread.commits.TakeRemote();
  TakeMovedIn(thread, /*close=*/false);
}

void CommitRouter::TakeMovedIn(QueueThread& thread, bool close) {
  thread.commits.TakeMovedIn(
      close, [this](uint64_t tag) { return EntryOf(tag).spread_units; });
}

}  // namespace pvdisk::fuse::channel
