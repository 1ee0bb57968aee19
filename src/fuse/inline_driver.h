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
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "fuse/channel/ring_companion.h"
#include "fuse/disk.h"
#include "io/ring_lender.h"
#include "transport/backend_loop.h"
#include "transport/kick_handler.h"

namespace pvdisk::fuse {

class InlineDriver final : public channel::RingCompanion, public io::CqeSink {
 public:
  // Drives queue `qid` of each of `disks` (which must outlive the driver
  // and use the inline placement).
  InlineDriver(std::vector<Disk*> disks, uint32_t qid);
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
  // One disk's queue as this thread drives it.
  struct DrivenQueue final : public transport::KickHandler {
    InlineDriver* driver = nullptr;
    transport::BackendLoop* backend = nullptr;
    int kick_fd = -1;
    uint64_t kick_count = 0;  // the armed read's buffer
    bool read_armed = false;
    // The read failed for good (not EAGAIN/EINTR/ECANCELED): not re-armed,
    // so a broken descriptor cannot make the thread spin; kicks from other
    // threads are then seen only when this thread's own work brings it
    // round (logged once).
    bool read_broken = false;
    void HandleKick() override;
  };

  // Queues a read on every kick eventfd that has none.
  void ArmKickReads();

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
};

// How many submission entries a round of the inline placement may need
// for `disks` on one FUSE queue thread (their rings' depths, the extra I/Os
// their images' engines may issue beyond them, and kick reads).
uint32_t InlineSubmissionEntries(const std::vector<Disk*>& disks);

}  // namespace pvdisk::fuse
