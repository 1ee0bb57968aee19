// UringChannel: FUSE requests through io_uring (FUSE-over-io_uring, kernel
// 6.14+, protocol 7.42; reference/fuse.md §3).
//
// The kernel keeps one FUSE queue per possible CPU and puts a request on the
// queue of the CPU its caller runs on. We register every queue (the kernel
// switches to the ring only when all have entries; too few would hang the
// mount), each owned by one thread (placed by --fuse-queue-pin) with its own
// io_uring (128-byte SQEs). A queue has `depth` ring entries, each a header
// buffer and a payload buffer the kernel fills with a request; the owner thread
// hands it to the Session and, once answered, sends COMMIT_AND_FETCH, which
// returns the reply and re-arms the entry in one command. Registration is
// possible only after the INIT reply (which is read and answered on
// /dev/fuse): the Session's OnInitialized callback calls Register().
// FORGET and INTERRUPT stay on /dev/fuse, for a ClassicChannel reader.
//
// A queue's thread may have a RingCompanion (ring_companion.h): the inline
// placement's backends, which borrow the queue's ring for image I/O. Each
// round the thread handles its completions (FUSE requests, image I/O,
// kicks), runs the companion (which may answer requests), and submits the
// commits and the new I/O with one io_uring_enter that also waits.
//
// Replies from other threads (the queue's completion path answers READs and
// WRITEs on the backend thread today): the answering thread writes the
// reply into the entry's own buffers (the entry is ours until committed),
// then appends the entry to the queue's locked commit list and wakes the
// owner through an eventfd that its ring watches, only if no wake-up is
// pending already. Replies made on the owner thread (synchronous handlers,
// and the inline placement's) are committed directly, batched into the next
// io_uring_enter; one that carries 64 KiB of data or more goes at once.
//
// Spreading (`spread`, --fuse-spread; the inline placement): the kernel
// finds a COMMIT_AND_FETCH's entry by the queue id and commit id it
// carries, whichever of our rings it comes on, and sends that entry's next
// request to the ring that committed it. So an entry of FUSE queue q may be
// held by another queue's thread: the thread whose ring it was last
// committed on (Entry::holder) takes its requests and commits its replies.
// At depth a thread hands every other reply it makes to another queue
// thread, which commits it and keeps the entry; an entry that comes alone
// to a thread not its own goes home the same way (SpreadTarget). Depth is
// weighed (a request by the data it brings, which the kernel copies into
// the entry on the taking thread): sixteen reads, eight 4 KiB writes, or
// two large writes. One submitter's
// depth, all on its CPU's queue, then runs on every CPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "fuse/channel/payload_arena.h"
#include "fuse/channel/queue_affinity.h"
#include "fuse/channel/ring_companion.h"
#include "fuse/protocol/reply.h"
#include "fuse/protocol/session.h"

namespace pvdisk::fuse::channel {

// Entries per queue. Every entry has a 1 MiB payload buffer, but only the
// pages a request touches become resident, and the kernel reuses the most
// recently committed entry first, so a deep queue costs address space, not
// memory. 128: an iodepth-64 job (or two of 32) on one CPU still has all
// its requests on the ring.
inline constexpr uint32_t kDefaultUringQueueDepth = 128;
inline constexpr uint32_t kMaxUringQueueDepth = 1024;

// The kernel's num_possible_cpus(): how many queues must be registered.
uint32_t PossibleCpus();

class UringChannel final : public protocol::ReplySink {
 public:
  // `fd`: the connection's /dev/fuse fd (not owned). `payload_bytes`: each
  // entry's payload buffer, at least the negotiated max_write.
  // `make_companion` (may be empty) gives each queue its companion;
  // `companion_sq_entries` is the submission room they need per round.
  // `arena` (may be null; not owned): where the entries' payload buffers
  // are, when the disks may grant them to their backends
  // (payload_arena.h); it must have PossibleCpus() queues of this depth and
  // payload size. Without one each queue maps its own. `pin`: where each
  // queue's thread runs (queue_affinity.h). `spread`: hand replies between
  // queue threads at depth (above; meant for queues with companions).
  UringChannel(int fd, protocol::Session* session, uint32_t queue_depth,
               uint32_t payload_bytes,
               RingCompanionMaker make_companion = nullptr,
               uint32_t companion_sq_entries = 0,
               const PayloadArena* arena = nullptr,
               QueuePin pin = QueuePin::kAuto, bool spread = false);
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
  uint32_t queue_depth() const { return depth_; }

  void Send(uint64_t slot, uint64_t unique, int error,
            std::span<const iovec> payload) override;
  std::span<uint8_t> PayloadBuffer(uint64_t slot) override;

 private:
  struct Queue;
  void Run(Queue* queue);
  // On `queue`'s thread, between rounds or as it ends: counts it towards
  // StopTaking's wait once it has seen stop_taking_ (or `ended`).
  void NoteStopTakingSeen(Queue* queue, bool ended);
  // On the holder's thread, for a reply it makes to an entry of `owner`:
  // the queue thread to hand the entry to, or null to commit it here.
  Queue* SpreadTarget(Queue& holder, const Queue& owner);
  friend struct Queue;

  const int fd_;
  protocol::Session* const session_;
  const uint32_t depth_;
  const uint32_t payload_bytes_;
  const RingCompanionMaker make_companion_;
  const uint32_t companion_sq_entries_;
  const PayloadArena* const arena_;
  const QueuePin pin_;
  const bool spread_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::atomic<bool> stop_taking_{false};
  std::atomic<bool> stop_{false};

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
