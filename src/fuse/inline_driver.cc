#include "fuse/inline_driver.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace pvdisk::fuse {
namespace {

// The driver whose thread this is: a kick from it is a function call.
thread_local const InlineDriver* current_driver = nullptr;

}  // namespace

InlineDriver::InlineDriver(std::vector<Disk*> disks, uint32_t qid)
    : disks_(std::move(disks)), qid_(qid) {}

InlineDriver::~InlineDriver() = default;

absl::Status InlineDriver::Attach(io::RingLender* lender) {
  current_driver = this;
  transport::SetThreadQueueHint(static_cast<int>(qid_));
  lender_ = lender;
  tag_ = lender->Lend(this);
  for (Disk* disk : disks_) {
    auto queue = std::make_unique<DrivenQueue>();
    queue->driver = this;
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
  return absl::OkStatus();
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
    if (queue.read_armed || queue.read_broken) continue;
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
  ArmKickReads();
  kicked_ = false;
  bool busy = false;
  for (auto& queue : queues_) busy |= queue->backend->RunRound();
  // A kick during the rounds (a completion that submitted more to a queue
  // already done this round) needs another round before sleeping.
  return busy || kicked_;
}

uint32_t InlineDriver::PollUs() {
  uint32_t longest = 0;
  polling_.clear();
  for (auto& queue : queues_) {
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
  // no engine holds I/O on the ring that is about to close.
  for (auto& queue : queues_) queue->backend->ReleaseEngine();
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
