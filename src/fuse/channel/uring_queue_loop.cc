// The FUSE uring queue thread's loop (UringChannel::Run): set up the queue,
// wait for the go, register the entries, then rounds until stopped. The
// policies it applies are in their own files: commit_router.h (which
// thread commits a reply, and when), early_submit.h, queue_affinity.h,
// ring_companion.h (what the companion does in a round).
#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/status_macros.h"
#include "fuse/channel/early_submit.h"
#include "fuse/channel/queue_affinity.h"
#include "fuse/channel/spread_policy.h"
#include "fuse/channel/uring_channel.h"
#include "fuse/protocol/request.h"

namespace pvdisk::fuse::channel {

absl::Status UringChannel::SetUp(QueueThread* thread) {
  PVDISK_RETURN_IF_ERROR(thread->queue.SetUp(fd_, options_.queue_depth,
                                             payload_bytes_, options_.arena,
                                             companions_.sq_entries));
  // The requests this thread holds are the ring's open ones: a borrower
  // that would block the thread (a flush, io/flush_policy.h) asks.
  thread->queue.CountRequestsOf(&thread->commits);
  if (companions_.make) {
    thread->companion = companions_.make(thread->queue.qid());
    if (thread->companion) {
      PVDISK_RETURN_IF_ERROR(thread->companion->Attach(&thread->queue));
      thread->companion_attached = true;
    }
  }
  return absl::OkStatus();
}

void UringChannel::Run(QueueThread* thread) {
  current_thread_ = thread;
  UringQueue& queue = thread->queue;
  // Where this thread runs: on its queue's CPU, where the requests come
  // from, or off it while they come several at once (queue_affinity.h).
  QueueAffinity affinity(options_.queue_pin, queue.qid(),
                         options_.auto_pin_deep_at);

  absl::Status setup = SetUp(thread);
  bool register_fuse = true;
  {
    std::unique_lock<std::mutex> lock(start_mu_);
    if (!setup.ok() && setup_error_.ok()) setup_error_ = setup;
    ++set_up_;
    start_cv_.notify_all();
    start_cv_.wait(lock, [&] { return go_; });
    register_fuse = register_fuse_;
  }
  RingCompanion* companion =
      thread->companion_attached ? thread->companion.get() : nullptr;
  if (!setup.ok() || stop_.load(std::memory_order_acquire)) {
    if (companion) companion->Detach();
    NoteStopTakingSeen(thread, /*ended=*/true);
    current_thread_ = nullptr;
    return;
  }

  if (register_fuse) queue.RegisterEntries();
  queue.ArmWake();
  bool stopping = false;
  for (;;) {
    // Fixed buffers of entries that are to be made huge are dropped here,
    // so that the collapser can (huge_collapser.h).
    queue.DropUnpinnable();
    // The companion answers what its I/O finished (replies made here are
    // local commits) and queues new I/O on this ring.
    const bool busy = companion != nullptr && companion->Run();
    router_.Flush(*thread);
    if (stopping && thread->commits.with_handler() == 0) {
      router_.TakeMovedIn(*thread, /*close=*/true);
      router_.Flush(*thread);
      io_uring_submit(queue.uring());  // the last commits
      break;
    }
    // A busy round enters the kernel even with nothing to submit: with
    // COOP_TASKRUN that is where completions are posted. An idle one may
    // first hand over its commits and I/O and spin for their completion
    // (the companion says how long).
    const uint32_t poll_us =
        busy || companion == nullptr ? 0 : companion->PollUs();
    bool spun_into_work = false;
    if (poll_us > 0) {
      io_uring_submit(queue.uring());
      spun_into_work = queue.SpinForCompletion(poll_us, stop_);
      if (spun_into_work) companion->PollHit();
    }
    // A spin ends mostly on a completion its own sched_yield() already
    // posted (COOP_TASKRUN's task work runs on the way back from any system
    // call): then, with nothing to submit, entering the kernel again would
    // cost a system call and do nothing.
    int ret = 0;
    if (busy || (spun_into_work && queue.NeedsEnter())) {
      ret = io_uring_submit_and_get_events(queue.uring());
    } else if (!spun_into_work) {
      ret = io_uring_submit_and_wait(queue.uring(), 1);
    }
    if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
      LogInfo("FUSE queue %u: io_uring_enter failed: %s", queue.qid(),
              strerror(-ret));
      break;
    }
    unsigned head;
    unsigned taken = 0;    // FUSE requests this round
    unsigned at_once = 0;  // the most held at once after a take
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(queue.uring(), head, cqe) {
      const uint64_t tag = cqe->user_data;
      const int res = cqe->res;
      // Seen as soon as read: what the ring still shows as posted while
      // this one is handled (HasWaitingCompletions, which a flush asks
      // before it blocks the thread: io/flush_policy.h) is what waits.
      io_uring_cq_advance(queue.uring(), 1);
      if (queue.RouteToSink(tag, res)) continue;
      if (tag == kWakeTag) {
        router_.TakeRemote(*thread);
        if (stop_.load(std::memory_order_acquire)) stopping = true;
        queue.ArmWake();
        continue;
      }
      const unsigned before = taken;
      OnEntryCompletion(*thread, tag, res, &taken, &at_once);
      // Last in the entry's turn: the commits flushed here hand entries,
      // this one included, back to the kernel, which may write a new
      // request into them at once. (A failed submit leaves the SQEs for the
      // round's own submit.)
      if (taken != before && EarlySubmitDue(companion != nullptr, taken)) {
        companion->Run();  // takes the requests, queues their image I/O
        router_.Flush(*thread);
        io_uring_submit(queue.uring());
      }
    }
    affinity.Round(at_once);
    // Every request this round took has reached the Session; from the next
    // round on, a thread that saw the flag parks what comes.
    NoteStopTakingSeen(thread, /*ended=*/false);
    if (stop_.load(std::memory_order_acquire)) stopping = true;
  }
  NoteStopTakingSeen(thread, /*ended=*/true);
  if (companion) companion->Detach();
  current_thread_ = nullptr;
}

void UringChannel::OnEntryCompletion(QueueThread& thread, uint64_t tag, int res,
                                     unsigned* taken, unsigned* at_once) {
  if (EntryQueue(tag) >= queues_.size()) return;
  UringQueue& owner = queues_[EntryQueue(tag)]->queue;
  const uint32_t index = EntryIndex(tag);
  if (index >= owner.depth()) return;
  UringEntry& entry = owner.entry(index);
  if (res == -EAGAIN || res == -EINTR) {
    thread.queue.QueueCommand(owner, index, entry.last_cmd);
    return;
  }
  if (res != 0) {
    // -ENOTCONN / -ECANCELED: the connection or the ring is going away.
    if (res != -ENOTCONN && res != -ECANCELED) {
      LogInfo("FUSE queue %u: ring entry failed: %s", thread.queue.qid(),
              strerror(-res));
    }
    entry.state = EntryState::kDead;
    return;
  }
  if (stop_taking_.load(std::memory_order_acquire)) {
    entry.commit_id = entry.header->ring_ent_in_out.commit_id;
    entry.state = EntryState::kParked;  // ended by the kernel at unmount
    return;
  }
  const protocol::RawRequest raw = owner.TakeRequest(index);
  if (promotion_ != nullptr) NoteLarge(owner, index, raw);
  entry.spread_units = SpreadUnits(static_cast<uint32_t>(raw.payload.size()));
  thread.commits.Hold(entry.spread_units);
  ++*taken;
  *at_once = std::max(*at_once, thread.commits.with_handler());
  // Read before the entry is handed on: once Process has passed it to a
  // handler, the reply (from this thread, a backend or interrupt thread, or
  // another queue thread's commit) and then the kernel's next request
  // overwrite the header, so nothing of it is read afterwards.
  const uint32_t opcode = raw.header->opcode;
  const uint64_t unique = raw.header->unique;
  const uint64_t slot = EntrySlot(owner.qid(), index);
  session_->Process(raw, this, slot);
  if (protocol::ExpectsNoReply(opcode)) {
    // Never sent over the ring (they stay on /dev/fuse), and the Session
    // answers them with nothing; the entry must still go back.
    protocol::Reply(this, slot, unique).Error(ENOSYS);
  }
}

}  // namespace pvdisk::fuse::channel
