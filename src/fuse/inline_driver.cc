#include "fuse/inline_driver.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace pvdisk::fuse {
namespace {

// The driver whose thread this is: a kick from it is a function call.
thread_local const InlineDriver* current_driver = nullptr;

}  // namespace

InlineDriver::InlineDriver(std::vector<Disk*> disks, uint32_t qid,
                           InlineDrivers* drivers)
    : disks_(std::move(disks)), qid_(qid), drivers_(drivers) {}

InlineDriver::~InlineDriver() { Leave(); }

absl::Status InlineDriver::Attach(io::RingLender* lender) {
  current_driver = this;
  transport::SetThreadQueueHint(static_cast<int>(qid_));
  lender_ = lender;
  tag_ = lender->Lend(this);
  // Under the set's lock: a detach either finds this driver attached (and
  // asks it to drop the disk) or has dropped the disk before (skipped here).
  std::lock_guard<std::mutex> attaching(drivers_->mu_);
  for (Disk* disk : disks_) {
    if (drivers_->dropped_.count(disk) != 0) continue;
    auto queue = std::make_unique<DrivenQueue>();
    queue->driver = this;
    queue->disk = disk;
    absl::StatusOr<transport::Transport::Driven> driven =
        disk->AttachDriven(qid_, lender, queue.get());
    if (!driven.ok()) {
      return absl::Status(driven.status().code(),
                          absl::StrCat(disk->name(), ", queue ", qid_, ": ",
                                       driven.status().message()));
    }
    queue->backend = driven->backend;
    queue->kick_fd = driven->kick_fd;
    queues_.push_back(std::move(queue));
  }
  drivers_->attached_.push_back(this);
  registered_ = true;
  return absl::OkStatus();
}

void InlineDriver::Leave() {
  std::lock_guard<std::mutex> lock(drivers_->mu_);
  if (!registered_) return;
  registered_ = false;
  std::erase(drivers_->attached_, this);
}

void InlineDriver::Drop(Disk* disk) {
  std::unique_lock<std::mutex> lock(drop_mu_);
  if (gone_) return;
  DrivenQueue* queue = nullptr;
  for (auto& driven : queues_) {
    if (driven->disk == disk) queue = driven.get();
  }
  if (queue == nullptr || queue->dropped) return;
  drops_.push_back(disk);
  drop_pending_.store(true, std::memory_order_release);
  // Wakes the thread: its armed read on the kick eventfd completes (and a
  // read armed after this completes at once). Its round then drops the
  // queue and arms no read on that eventfd again. The kick is repeated
  // while no round has come: a kick read that failed for good is no longer
  // armed, and the thread may sleep until its next FUSE request.
  constexpr auto kRekick = std::chrono::milliseconds(100);
  auto dropped = [&] {
    return gone_ ||
           std::find(drops_.begin(), drops_.end(), disk) == drops_.end();
  };
  do {
    uint64_t one = 1;
    while (write(queue->kick_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  } while (!drop_done_.wait_for(lock, kRekick, dropped));
}

void InlineDriver::TakeDrops() {
  if (!drop_pending_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(drop_mu_);
  drop_pending_.store(false, std::memory_order_relaxed);
  for (Disk* disk : drops_) {
    for (auto& queue : queues_) {
      if (queue->disk == disk && !queue->dropped) DropQueue(*queue);
    }
  }
  drops_.clear();
  drop_done_.notify_all();
}

void InlineDriver::DropQueue(DrivenQueue& queue) {
  // The disk has drained: its engine holds no I/O, and destroying it
  // empties its fixed-file slots of this ring.
  queue.backend->ReleaseEngine();
  std::erase(polling_, queue.backend);
  queue.backend = nullptr;
  queue.dropped = true;
}

void InlineDrivers::Drop(Disk* disk) {
  std::lock_guard<std::mutex> lock(mu_);
  dropped_.insert(disk);
  for (InlineDriver* driver : attached_) driver->Drop(disk);
}

void InlineDriver::DrivenQueue::HandleKick() {
  if (current_driver == driver) {
    driver->kicked_ = true;  // this thread's next round takes the requests
    return;
  }
  uint64_t one = 1;
  while (write(kick_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void InlineDriver::ArmKickReads() {
  for (size_t i = 0; i < queues_.size(); ++i) {
    DrivenQueue& queue = *queues_[i];
    if (queue.read_armed || queue.read_broken || queue.dropped) continue;
    io_uring_sqe* sqe = io_uring_get_sqe(lender_->ring());
    if (sqe == nullptr) {
      io_uring_submit(lender_->ring());
      sqe = io_uring_get_sqe(lender_->ring());
      if (sqe == nullptr) return;  // next round
    }
    io_uring_prep_read(sqe, queue.kick_fd, &queue.kick_count,
                       sizeof(queue.kick_count), 0);
    io_uring_sqe_set_data64(sqe, tag_ | i);
    queue.read_armed = true;
  }
}

void InlineDriver::OnCqe(uint64_t user_data, int32_t res) {
  uint64_t index = user_data & io::RingLender::kSinkMask;
  if (index >= queues_.size()) return;
  DrivenQueue& queue = *queues_[index];
  queue.read_armed = false;
  if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED) {
    queue.read_broken = true;
    LogInfo(
        "inline placement: reading a kick eventfd failed: %s; no longer "
        "watched",
        strerror(-res));
  }
  kicked_ = true;  // look at the ring either way
}

bool InlineDriver::Run() {
  TakeDrops();
  ArmKickReads();
  kicked_ = false;
  bool busy = false;
  for (auto& queue : queues_) {
    if (!queue->dropped) busy |= queue->backend->RunRound();
  }
  // A kick during the rounds (a completion that submitted more to a queue
  // already done this round) needs another round before sleeping.
  return busy || kicked_;
}

uint32_t InlineDriver::PollUs() {
  uint32_t longest = 0;
  polling_.clear();
  for (auto& queue : queues_) {
    if (queue->dropped) continue;
    uint32_t us = queue->backend->DrivenPollUs();
    if (us == 0) continue;
    longest = std::max(longest, us);
    polling_.push_back(queue->backend);
  }
  return longest;
}

void InlineDriver::PollHit() {
  for (transport::BackendLoop* backend : polling_) backend->CountPollHit();
}

void InlineDriver::Detach() {
  // Every request has been answered (the channel detaches only then), so
  // no engine holds I/O on the ring that is about to close. A detach
  // waiting for this driver returns once it is gone.
  {
    std::lock_guard<std::mutex> lock(drop_mu_);
    for (auto& queue : queues_) {
      if (!queue->dropped) DropQueue(*queue);
    }
    drops_.clear();
    gone_ = true;
    drop_done_.notify_all();
  }
  Leave();
  if (lender_ != nullptr) lender_->Unlend(tag_);
  current_driver = nullptr;
  transport::SetThreadQueueHint(-1);
}

uint32_t InlineSubmissionEntries(const std::vector<Disk*>& disks) {
  uint32_t entries = 0;
  for (const Disk* disk : disks) {
    // Each ring slot's I/O, the extra I/Os the image's engine may issue
    // beyond them, the kick read and a delay model's timeout.
    const uint32_t ring_size = disk->transport_options().queue.ring_size;
    entries += ring_size + disk->EngineExtraIos(ring_size) + 2;
  }
  return entries;
}

}  // namespace pvdisk::fuse
