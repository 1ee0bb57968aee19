// UringChannel: FUSE requests through io_uring (FUSE-over-io_uring, kernel
// 6.14+, protocol 7.42; reference/fuse.md §3).
//
// The kernel keeps one FUSE queue per possible CPU and puts a request on the
// queue of the CPU its caller runs on. We register every queue (the kernel
// switches to the ring only when all have entries; too few would hang the
// mount), each owned by one thread with its own io_uring. Registration is
// possible only after the INIT reply (which is read and answered on
// /dev/fuse): the Session's OnInitialized callback calls Register(). FORGET
// and INTERRUPT stay on /dev/fuse, for a ClassicChannel reader.
//
// The parts, each in its own file:
//   uring_queue.h     the protocol of one queue: ring, entries, commands
//   uring_queue_loop.cc  the queue thread's loop (below)
//   commit_router.h   where and when a reply is committed (cross-thread
//                     commits, commit at once)
//   spread_policy.h   spreading replies between queue threads
//                     (--fuse-spread)
//   early_submit.h    submitting a round's image I/O before its end
//   queue_affinity.h  where a queue's thread runs (--fuse-queue-pin)
//   ring_companion.h  work that shares a queue's thread and ring (the
//                     inline placement's driver)
//   huge_collapser.h  making the payload entries that carry large requests
//                     huge (huge_promotion.h)
//
// The loop: each round the thread handles its completions (FUSE requests,
// which go to the Session; a companion's image I/O; wakes from other
// threads), runs the companion (which may answer requests), flushes the
// commits, and submits commits and new I/O with one io_uring_enter that also
// waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "fuse/channel/channel_options.h"
#include "fuse/channel/commit_router.h"
#include "fuse/channel/huge_collapser.h"
#include "fuse/channel/queue_thread.h"
#include "fuse/channel/ring_companion.h"
#include "fuse/channel/uring_support.h"
#include "fuse/protocol/reply.h"
#include "fuse/protocol/session.h"

namespace pvdisk::fuse::channel {

class UringChannel final : public protocol::ReplySink {
 public:
  // `fd`: the connection's /dev/fuse fd (not owned). `options`: the queues'
  // depth, their payload arena (may be null; then it must have
  // PossibleCpus() queues of this depth and payload size), where their
  // threads run, and whether replies spread (meant for queues with
  // companions). `payload_bytes`: each entry's payload buffer, at least the
  // negotiated max_write. `companions`: each queue's companion (may be
  // none).
  UringChannel(int fd, protocol::Session* session,
               const ChannelOptions& options, uint32_t payload_bytes,
               RingCompanions companions = {});
  ~UringChannel() override;
  UringChannel(const UringChannel&) = delete;
  UringChannel& operator=(const UringChannel&) = delete;

  // Sets up every queue's ring and buffers on its thread; returns the first
  // error (then nothing runs).
  absl::Status Start();
  // Lets the queues register their entries. Call once the INIT reply with
  // FUSE_OVER_IO_URING has been sent.
  void Register();
  // The kernel did not take FUSE over io_uring: the queues run without FUSE
  // entries, for their companions alone (requests come through /dev/fuse).
  void RunWithoutFuse();
  // From now on, requests that arrive are left unanswered (the kernel ends
  // them when the mount goes); requests already taken are still answered.
  // Returns once no queue thread can hand the Session another request: each
  // has finished the round in which it may have read the flag before it was
  // set (or has not begun, or has ended). Only then may the caller wait for
  // what is in flight to end: a request a thread took just before the flag
  // and handed on just after a drain had found nothing in flight was
  // submitted to stopped queues and never answered (the unmount hung).
  void StopTaking();
  // Waits until every request taken has been answered and committed, then
  // stops the threads and closes the rings.
  void Stop();

  uint32_t queue_count() const { return static_cast<uint32_t>(queues_.size()); }
  uint32_t queue_depth() const { return options_.queue_depth; }

  void Send(uint64_t slot, uint64_t unique, int error,
            std::span<const iovec> payload) override;
  std::span<uint8_t> PayloadBuffer(uint64_t slot) override;

 private:
  // The queue thread (uring_queue_loop.cc).
  void Run(QueueThread* thread);
  absl::Status SetUp(QueueThread* thread);
  // Handles the completion of a FUSE entry's command on `thread`'s ring:
  // a request to hand to the Session, an entry to re-arm, or one that ends.
  void OnEntryCompletion(QueueThread& thread, uint64_t tag, int res,
                         unsigned* taken, unsigned* at_once);
  // On the thread, between rounds or as it ends: counts it towards
  // StopTaking's wait once it has seen stop_taking_ (or `ended`).
  void NoteStopTakingSeen(QueueThread* thread, bool ended);
  // Entry `index` of `owner` took `raw`: if the request is large, asks for
  // the entry's huge page (huge_promotion.h).
  void NoteLarge(const UringQueue& owner, uint32_t index,
                 const protocol::RawRequest& raw);

  // The queue thread this is, for Send's same-thread path (null elsewhere).
  static constinit thread_local const QueueThread* current_thread_;

  const int fd_;
  protocol::Session* const session_;
  const ChannelOptions options_;
  const uint32_t payload_bytes_;
  const RingCompanions companions_;
  std::vector<std::unique_ptr<QueueThread>> queues_;
  std::atomic<bool> stop_taking_{false};
  std::atomic<bool> stop_{false};
  CommitRouter router_;
  // With a payload arena that has huge entries (started by Start, stopped
  // first by Stop: it wakes the queues).
  HugePromotion* promotion_ = nullptr;
  std::unique_ptr<HugeCollapser> collapser_;

  std::mutex start_mu_;
  std::condition_variable start_cv_;
  uint32_t set_up_ = 0;        // queues done with setup (ok or not)
  absl::Status setup_error_;   // the first setup error
  bool go_ = false;            // Register(), RunWithoutFuse() or Stop() called
  bool register_fuse_ = true;  // false after RunWithoutFuse()
  // Queue threads that will hand the Session no further request (they have
  // seen stop_taking_ between two rounds, or ended): StopTaking waits for all.
  uint32_t stop_taking_seen_ = 0;
};

}  // namespace pvdisk::fuse::channel
