#include "floor_disk.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "fuse/protocol/reply.h"
#include "io/ring_lender.h"

namespace pvdisk::bench {

using fuse::protocol::Reply;
using fuse::protocol::Request;

class FloorDiskQueue final : public fuse::channel::RingCompanion,
                             public io::CqeSink {
 public:
  FloorDiskQueue(int fd, uint32_t depth) : fd_(fd), slots_(depth) {
    for (uint32_t i = depth; i > 0; --i) free_.push_back(i - 1);
  }

  absl::Status Attach(io::RingLender* lender) override {
    lender_ = lender;
    tag_ = lender->Lend(this);
    current_ = this;
    return absl::OkStatus();
  }
  // Nothing to do between rounds: replies go from OnCqe, and the channel
  // submits the queued I/O with its own io_uring_enter.
  bool Run() override { return false; }
  // As pvdisk's inline placement (--poll-us 50): with I/O in flight while
  // the queue runs at a depth below 2 (a moving average), spin a little for
  // the completion rather than sleep, which saves the thread's wake-up at
  // iodepth 1.
  uint32_t PollUs() override {
    return InFlight() > 0 && depth_avg_ < 2 * kAvgScale ? kPollUs : 0;
  }
  void Detach() override {
    lender_->Unlend(tag_);
    current_ = nullptr;
  }

  void OnCqe(uint64_t user_data, int32_t res) override {
    const uint32_t index =
        static_cast<uint32_t>(user_data & io::RingLender::kSinkMask);
    if (index >= slots_.size()) return;
    Slot& slot = slots_[index];
    Reply reply = std::move(slot.reply);
    free_.push_back(index);
    if (res < 0) return reply.Error(-res);
    if (slot.is_read) return reply.Bytes(slot.buffer, static_cast<size_t>(res));
    reply.Struct(fuse::protocol::WriteOut(static_cast<uint32_t>(res)));
  }

  // Queues a read into (or a write from) `buffer`, which stays valid until
  // `reply` is sent; answers `reply` when it completes.
  void Queue(bool is_read, void* buffer, uint32_t bytes, uint64_t offset,
             Reply reply) {
    io_uring_sqe* sqe =
        free_.empty() ? nullptr : io_uring_get_sqe(lender_->ring());
    if (sqe == nullptr) return reply.Error(EIO);  // more than the depth
    const uint32_t index = free_.back();
    free_.pop_back();
    depth_avg_ = depth_avg_ - depth_avg_ / kAvgScale + InFlight();
    slots_[index] = Slot{std::move(reply), buffer, is_read};
    const int fixed = lender_->FixedBufferFor(buffer, bytes);
    if (is_read && fixed >= 0) {
      io_uring_prep_read_fixed(sqe, fd_, buffer, bytes, offset, fixed);
    } else if (is_read) {
      io_uring_prep_read(sqe, fd_, buffer, bytes, offset);
    } else if (fixed >= 0) {
      io_uring_prep_write_fixed(sqe, fd_, buffer, bytes, offset, fixed);
    } else {
      io_uring_prep_write(sqe, fd_, buffer, bytes, offset);
    }
    io_uring_sqe_set_data64(sqe, tag_ | index);
  }

  // The queue of the calling thread, or null off the queue threads.
  static FloorDiskQueue* current() { return current_; }

 private:
  struct Slot {
    Reply reply;
    void* buffer = nullptr;
    bool is_read = false;
  };

  static constexpr uint32_t kPollUs = 50;
  static constexpr uint32_t kAvgScale = 8;
  static thread_local FloorDiskQueue* current_;

  uint32_t InFlight() const {
    return static_cast<uint32_t>(slots_.size() - free_.size());
  }
  const int fd_;
  io::RingLender* lender_ = nullptr;
  uint64_t tag_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  // The requests in flight when each was queued, averaged (times kAvgScale).
  uint32_t depth_avg_ = 0;
};

thread_local FloorDiskQueue* FloorDiskQueue::current_ = nullptr;

std::unique_ptr<fuse::channel::RingCompanion> FloorDisk::MakeCompanion(
    uint32_t /*qid*/) {
  return std::make_unique<FloorDiskQueue>(fd_, depth_);
}

void FloorDisk::Read(const Request& request, uint64_t size, Reply reply) {
  const uint64_t count =
      request.offset >= size
          ? 0
          : std::min<uint64_t>(request.size, size - request.offset);
  if (count == 0) return reply.Bytes(nullptr, 0);
  FloorDiskQueue* queue = FloorDiskQueue::current();
  std::span<uint8_t> buffer = reply.PayloadBuffer();
  if (queue == nullptr || buffer.size() < count) return reply.Error(EIO);
  queue->Queue(/*is_read=*/true, buffer.data(), static_cast<uint32_t>(count),
               request.offset, std::move(reply));
}

void FloorDisk::Write(const Request& request, uint64_t size, Reply reply) {
  const uint64_t bytes = request.data.size();
  if (request.offset > size || bytes > size - request.offset) {
    return reply.Error(ENOSPC);
  }
  FloorDiskQueue* queue = FloorDiskQueue::current();
  if (queue == nullptr) return reply.Error(EIO);
  // The data is in the ring entry's payload, ours until the reply is sent.
  queue->Queue(/*is_read=*/false, const_cast<uint8_t*>(request.data.data()),
               static_cast<uint32_t>(bytes), request.offset, std::move(reply));
}

}  // namespace pvdisk::bench
