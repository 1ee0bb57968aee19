#include "floor_disk.h"

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/disk_arg.h"
#include "fuse/disk.h"
#include "fuse/protocol/reply.h"
#include "image/open_image.h"
#include "io/engine_factory.h"

namespace pvdisk::bench {

using fuse::protocol::Reply;
using fuse::protocol::Request;

class FloorDiskQueue final : public fuse::channel::RingCompanion {
 public:
  FloorDiskQueue(const FloorEngineMaker& make_engine, uint32_t depth)
      : make_engine_(make_engine), slots_(depth) {
    for (uint32_t i = depth; i > 0; --i) free_.push_back(i - 1);
  }

  absl::Status Attach(io::RingLender* lender) override {
    auto engine = make_engine_(lender, static_cast<uint32_t>(slots_.size()));
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    current_ = this;
    return absl::OkStatus();
  }
  // Answers what completed. The engine's I/O went to the kernel with the
  // channel's io_uring_enter, its completions came back through the ring.
  bool Run() override {
    completions_.clear();
    int got = engine_->Run(/*wait=*/false, completions_);
    if (got < 0) {
      // The engine failed as a whole: what it held will not complete.
      for (uint32_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].reply.pending()) Finish(i, got);
      }
      return false;
    }
    for (const io::IoCompletion& done : completions_) {
      if (!done.wake && done.tag < slots_.size()) {
        Finish(static_cast<uint32_t>(done.tag), done.result);
      }
    }
    return false;
  }
  // As pvdisk's inline placement (--poll-us 50): with I/O in flight while
  // the queue runs at a depth below 2 (a moving average), spin a little for
  // the completion rather than sleep, which saves the thread's wake-up at
  // iodepth 1.
  uint32_t PollUs() override {
    return InFlight() > 0 && depth_avg_ < 2 * kAvgScale ? kPollUs : 0;
  }
  void Detach() override {
    engine_.reset();
    current_ = nullptr;
  }

  // Queues `op` on [offset, offset + bytes) from or into `buffer` (which
  // stays valid until `reply` is sent); answers `reply` when it completes.
  void Queue(io::IoOp op, void* buffer, uint32_t bytes, uint64_t offset,
             Reply reply) {
    if (free_.empty()) return reply.Error(EIO);  // more than the depth
    const uint32_t index = free_.back();
    free_.pop_back();
    depth_avg_ = depth_avg_ - depth_avg_ / kAvgScale + InFlight();
    Slot& slot = slots_[index];
    slot.reply = std::move(reply);
    slot.op = op;
    slot.iov = iovec{buffer, bytes};
    io::IoRequest request;
    request.op = op;
    request.offset = offset;
    request.length = bytes;
    if (op == io::IoOp::kRead || op == io::IoOp::kWrite) {
      request.iov = &slot.iov;
      request.iov_count = 1;
    }
    request.tag = index;
    if (int rc = engine_->Queue(request); rc < 0) Finish(index, rc);
  }

  // The queue of the calling thread, or null off the queue threads.
  static FloorDiskQueue* current() { return current_; }

 private:
  struct Slot {
    Reply reply;
    io::IoOp op = io::IoOp::kRead;
    iovec iov{};
  };
  static constexpr uint32_t kPollUs = 50;
  static constexpr uint32_t kAvgScale = 8;
  static thread_local FloorDiskQueue* current_;

  uint32_t InFlight() const {
    return static_cast<uint32_t>(slots_.size() - free_.size());
  }

  // Answers slot `index` with `result` (bytes or a negative errno).
  void Finish(uint32_t index, int64_t result) {
    Slot& slot = slots_[index];
    Reply reply = std::move(slot.reply);
    free_.push_back(index);
    if (result < 0) return reply.Error(static_cast<int>(-result));
    switch (slot.op) {
      case io::IoOp::kRead:
        return reply.Bytes(slot.iov.iov_base, slot.iov.iov_len);
      case io::IoOp::kWrite:
        return reply.Struct(
            fuse::protocol::WriteOut(static_cast<uint32_t>(slot.iov.iov_len)));
      default:
        return reply.Ok();
    }
  }

  const FloorEngineMaker& make_engine_;
  std::unique_ptr<io::IoEngine> engine_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::vector<io::IoCompletion> completions_;
  // The requests in flight when each was queued, averaged (times kAvgScale).
  uint32_t depth_avg_ = 0;
};

thread_local FloorDiskQueue* FloorDiskQueue::current_ = nullptr;

absl::StatusOr<std::unique_ptr<FloorDisk>> FloorDisk::Open(
    std::string_view image, uint64_t size, uint32_t depth) {
  auto spec = cli::ParseDiskArg(absl::string_view(image.data(), image.size()));
  if (!spec.ok()) return spec.status();
  if (spec->read_only || spec->expected_size || spec->fault || spec->delay) {
    return absl::InvalidArgumentError(
        "fuse_floor serves an image file or rbd:POOL/IMAGE[,conf=PATH]"
        "[,id=CLIENT][,timeout=SECONDS], with no other option");
  }
  std::unique_ptr<FloorDisk> disk(new FloorDisk(size, depth));
  // As the mount opens it (image/open_image.h), without the image lock.
  image::ImageSpec image_spec =
      fuse::ImageSpecOf(*spec, io::EngineKind::kUring);
  image_spec.lock = false;
  auto opened = image::OpenImage(image_spec);
  if (!opened.ok()) return opened.status();
  disk->image_ = std::move(*opened);
  const uint64_t bytes = disk->image_->size_bytes();
  image::Image* served = disk->image_.get();
  disk->make_engine_ = [served](io::RingLender* lender, uint32_t depth)
      -> absl::StatusOr<std::unique_ptr<io::IoEngine>> {
    io::EngineOptions options;
    options.depth = depth;
    options.ring_lender = lender;
    return served->MakeEngine(options);
  };
  if (bytes < size) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec->path, " is ", bytes,
                     " bytes, less than SIZE_BYTES (", size, ")"));
  }
  return disk;
}

FloorDisk::~FloorDisk() = default;

std::unique_ptr<fuse::channel::RingCompanion> FloorDisk::MakeCompanion(
    uint32_t /*qid*/) {
  return std::make_unique<FloorDiskQueue>(make_engine_, depth_);
}

void FloorDisk::Read(const Request& request, Reply reply) {
  const uint64_t count =
      request.offset >= size_
          ? 0
          : std::min<uint64_t>(request.size, size_ - request.offset);
  if (count == 0) return reply.Bytes(nullptr, 0);
  FloorDiskQueue* queue = FloorDiskQueue::current();
  std::span<uint8_t> buffer = reply.PayloadBuffer();
  if (queue == nullptr || buffer.size() < count) return reply.Error(EIO);
  queue->Queue(io::IoOp::kRead, buffer.data(), static_cast<uint32_t>(count),
               request.offset, std::move(reply));
}

void FloorDisk::Write(const Request& request, Reply reply) {
  const uint64_t bytes = request.data.size();
  if (request.offset > size_ || bytes > size_ - request.offset) {
    return reply.Error(ENOSPC);
  }
  if (bytes == 0) return reply.Struct(fuse::protocol::WriteOut(0));
  FloorDiskQueue* queue = FloorDiskQueue::current();
  if (queue == nullptr) return reply.Error(EIO);
  // The data is in the ring entry's payload, ours until the reply is sent.
  queue->Queue(io::IoOp::kWrite, const_cast<uint8_t*>(request.data.data()),
               static_cast<uint32_t>(bytes), request.offset, std::move(reply));
}

void FloorDisk::Fsync(Reply reply) {
  FloorDiskQueue* queue = FloorDiskQueue::current();
  if (queue == nullptr) return reply.Error(EIO);
  queue->Queue(io::IoOp::kFlush, nullptr, 0, 0, std::move(reply));
}

}  // namespace pvdisk::bench
