// InlineDriver: the inline placement's work on one FUSE uring queue's
// thread: it drives pvdisk queue q of every disk, front and back, on FUSE
// queue q's thread and io_uring (a channel::RingCompanion).
//
// A request the thread receives goes to its own pvdisk queue (queue map
// "cpu", and the thread's queue hint wherever --fuse-queue-pin lets it run).
// The frontend pushes ring requests and kicks; the kick is a function call here
// that only notes the work (KickHandler), and the same round's
// BackendLoop::RunRound() takes the requests, queues the image I/O on this
// thread's ring (the uring engine borrows it), and, as completions arrive on
// the ring, answers them, publishes the responses and takes the interrupt
// inline: the frontend completes the BlockIos and the FUSE replies become
// commits of this thread's next io_uring_enter. No eventfd, no other thread on
// the path.
//
// Kicks from other threads (a write released by another queue's
// completion, a plug timer on the completion thread) still signal the
// queue's kick eventfd; the driver keeps a read armed on each, on the ring.
//
// `pvdisk detach` of such a disk: once the disk has drained and shut down,
// InlineDrivers::Drop asks every driver to let it go, and each does so on
// its own thread at its next round (the request is one atomic flag the
// round reads): it destroys the disk's engine, which empties the ring's
// fixed-file slots of the image, and never touches the disk's queue again.
// The driver's small per-disk record (the kick read's buffer, which a read
// still in the kernel may write) stays until the driver goes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "fuse/channel/ring_companion.h"
#include "fuse/disk.h"
#include "io/ring_lender.h"
#include "transport/backend_loop.h"
#include "transport/kick_handler.h"

namespace pvdisk::fuse {

class InlineDrivers;

class InlineDriver final : public channel::RingCompanion, public io::CqeSink {
 public:
  // Drives queue `qid` of each of `disks` (which must use the inline
  // placement, and outlive the driver unless `drivers` has had them
  // dropped), and enters `drivers` while attached.
  InlineDriver(std::vector<Disk*> disks, uint32_t qid, InlineDrivers* drivers);
  ~InlineDriver() override;

  absl::Status Attach(io::RingLender* lender) override;
  bool Run() override;
  // The longest spin any driven queue's backend asks for (--poll-us, while
  // its I/O is in flight at depth below 2: the wake-up for the lone
  // completion is then much of each request's latency).
  uint32_t PollUs() override;
  void PollHit() override;
  void Detach() override;
  void OnCqe(uint64_t user_data, int32_t res) override;

 private:
  friend class InlineDrivers;
  // One disk's queue as this thread drives it.
  struct DrivenQueue final : public transport::KickHandler {
    InlineDriver* driver = nullptr;
    Disk* disk = nullptr;
    transport::BackendLoop* backend = nullptr;
    int kick_fd = -1;
    uint64_t kick_count = 0;  // the armed read's buffer
    bool read_armed = false;
    // The read failed for good (not EAGAIN/EINTR/ECANCELED): not re-armed,
    // so a broken descriptor cannot make the thread spin; kicks from other
    // threads are then seen only when this thread's own work brings it
    // round (logged once).
    bool read_broken = false;
    // Let go by detach: `backend` is gone, the read is not re-armed.
    bool dropped = false;
    void HandleKick() override;
  };

  // Queues a read on every kick eventfd that has none.
  void ArmKickReads();
  // Control thread: asks this driver to let `disk` go and waits until its
  // thread has (or has detached).
  void Drop(Disk* disk);
  // The driver's thread: lets go of the disks Drop asked for.
  void TakeDrops();
  void DropQueue(DrivenQueue& queue);
  // Leaves `drivers_` (on Detach, or destruction after a failed Attach).
  void Leave();

  const std::vector<Disk*> disks_;
  const uint32_t qid_;
  io::RingLender* lender_ = nullptr;
  uint64_t tag_ = 0;
  // Stable addresses: the kernel writes kick_count, frontends hold the
  // KickHandler.
  std::vector<std::unique_ptr<DrivenQueue>> queues_;
  bool kicked_ = false;  // a kick on this thread since the last round
  // The backends that asked for the spin PollUs() last allowed.
  std::vector<transport::BackendLoop*> polling_;

  InlineDrivers* const drivers_;
  bool registered_ = false;  // in drivers_ (its mutex guards this)
  // Drop's mailbox: set under drop_mu_, read by every round.
  std::atomic<bool> drop_pending_{false};
  std::mutex drop_mu_;
  std::condition_variable drop_done_;
  std::vector<Disk*> drops_;  // asked for, not yet let go
  bool gone_ = false;         // detached: takes no more
};

// The attached drivers of a mount's FUSE queues, for detach.
class InlineDrivers {
 public:
  // Control path: `disk` (shut down: nothing in flight) is let go by every
  // driver; returns once each has done so on its thread. A driver that
  // attaches later skips it. Must not run on a FUSE queue thread.
  void Drop(Disk* disk);

 private:
  friend class InlineDriver;
  std::mutex mu_;
  std::vector<InlineDriver*> attached_;
  std::set<const Disk*> dropped_;
};

// How many submission entries a round of the inline placement may need
// for `disks` on one FUSE queue thread (their rings' depths, the extra I/Os
// their images' engines may issue beyond them, and kick reads).
uint32_t InlineSubmissionEntries(const std::vector<Disk*>& disks);

}  // namespace pvdisk::fuse
