#include "fuse/channel/uring_channel.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "fuse/protocol/abi.h"

namespace pvdisk::fuse::channel {

constinit thread_local const QueueThread* UringChannel::current_thread_ =
    nullptr;

UringChannel::UringChannel(int fd, protocol::Session* session,
                           const ChannelOptions& options,
                           uint32_t payload_bytes, RingCompanions companions)
    : fd_(fd),
      session_(session),
      options_(options),
      payload_bytes_(payload_bytes),
      companions_(std::move(companions)),
      router_(queues_, options.spread, stop_taking_) {}

UringChannel::~UringChannel() { Stop(); }

absl::Status UringChannel::Start() {
  uint32_t count = PossibleCpus();
  const PayloadArena* arena = options_.arena;
  if (arena != nullptr &&
      (arena->queues() < count || arena->depth() != options_.queue_depth ||
       arena->payload_bytes() != payload_bytes_)) {
    return absl::InternalError(
        "the FUSE payload arena does not match the uring queues");
  }
  for (uint32_t q = 0; q < count; ++q) {
    queues_.push_back(std::make_unique<QueueThread>(q));
  }
  // Set before the queue threads start, which read it on every request; the
  // collapser starts once they are set up (it wakes them).
  if (arena != nullptr) promotion_ = arena->promotion();
  for (auto& queue : queues_) {
    QueueThread* q = queue.get();
    std::string name = absl::StrCat("pvdisk-fuse-q", q->queue.qid());
    q->thread = StartThreadWithoutSignals(name.c_str(), [this, q] { Run(q); });
  }
  std::unique_lock<std::mutex> lock(start_mu_);
  start_cv_.wait(lock, [&] { return set_up_ == queues_.size(); });
  absl::Status error = setup_error_;
  lock.unlock();
  if (!error.ok()) {
    Stop();
    return error;
  }
  if (promotion_ != nullptr) {
    collapser_ = std::make_unique<HugeCollapser>(promotion_, [this] {
      for (auto& queue : queues_) {
        if (queue->queue.can_wake()) queue->queue.Wake();
      }
    });
  }
  return error;
}

void UringChannel::Register() {
  std::lock_guard<std::mutex> lock(start_mu_);
  go_ = true;
  start_cv_.notify_all();
}

void UringChannel::RunWithoutFuse() {
  std::lock_guard<std::mutex> lock(start_mu_);
  register_fuse_ = false;
  go_ = true;
  start_cv_.notify_all();
}

void UringChannel::StopTaking() {
  stop_taking_.store(true, std::memory_order_seq_cst);
  std::unique_lock<std::mutex> lock(start_mu_);
  // Not begun: a thread that begins later (go_ is set under this mutex)
  // reads the flag after we set it.
  if (!go_) return;
  lock.unlock();
  // A thread asleep in io_uring_enter ends its round on the wake.
  for (auto& queue : queues_) {
    if (queue->queue.can_wake()) queue->queue.Wake();
  }
  // Counted before waiting: Stop() clears queues_ (a caller that gives up
  // on this wait may call it from another thread).
  const size_t queues = queues_.size();
  lock.lock();
  start_cv_.wait(lock, [&] { return stop_taking_seen_ == queues; });
}

void UringChannel::NoteStopTakingSeen(QueueThread* thread, bool ended) {
  if (thread->stop_taking_seen) return;
  if (!ended && !stop_taking_.load(std::memory_order_seq_cst)) return;
  thread->stop_taking_seen = true;
  std::lock_guard<std::mutex> lock(start_mu_);
  ++stop_taking_seen_;
  start_cv_.notify_all();
}

void UringChannel::Stop() {
  collapser_.reset();  // before queues_ goes: it wakes them
  stop_taking_.store(true, std::memory_order_release);
  stop_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(start_mu_);
    go_ = true;
    start_cv_.notify_all();
  }
  for (auto& queue : queues_) {
    if (queue->queue.can_wake()) queue->queue.Wake();
    if (queue->thread.joinable()) queue->thread.join();
  }
  queues_.clear();
}

void UringChannel::Send(uint64_t slot, uint64_t unique, int error,
                        std::span<const iovec> payload) {
  UringQueue& owner = queues_[SlotQueue(slot)]->queue;
  const uint32_t index = SlotIndex(slot);
  const size_t bytes = owner.WriteReply(index, unique, error, payload);
  router_.Route(current_thread_, owner, index, bytes);
}

std::span<uint8_t> UringChannel::PayloadBuffer(uint64_t slot) {
  UringQueue& queue = queues_[SlotQueue(slot)]->queue;
  return {queue.entry(SlotIndex(slot)).payload, payload_bytes_};
}

void UringChannel::NoteLarge(const UringQueue& owner, uint32_t index,
                             const protocol::RawRequest& raw) {
  uint32_t bytes = 0;
  if (raw.header->opcode == abi::kRead &&
      raw.op_in.size() >= sizeof(abi::fuse_read_in)) {
    bytes = reinterpret_cast<const abi::fuse_read_in*>(raw.op_in.data())->size;
  } else if (raw.header->opcode == abi::kWrite) {
    bytes = static_cast<uint32_t>(raw.payload.size());
  }
  if (bytes >= kLargeRequestBytes) promotion_->Want(owner.qid(), index);
}

}  // namespace pvdisk::fuse::channel
