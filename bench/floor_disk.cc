#include "floor_disk.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <deque>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/disk_arg.h"
#include "fuse/disk.h"
#include "fuse/protocol/reply.h"
#include "image/open_image.h"
#include "io/deadline.h"
#include "io/engine_factory.h"
#include "io/ring_timer.h"

namespace pvdisk::bench {

using fuse::protocol::Reply;
using fuse::protocol::Request;

class FloorDiskQueue final : public fuse::channel::RingCompanion {
 public:
  // `total`: the requests with the engines of all queue threads, which
  // options.max_inflight caps.
  FloorDiskQueue(const FloorEngineMaker& make_engine, uint32_t depth,
                 const FloorOptions& options, std::atomic<uint32_t>* total)
      : make_engine_(make_engine),
        max_inflight_(options.max_inflight),
        spin_while_held_(options.spin_while_held),
        total_(total),
        slots_(depth) {
    for (uint32_t i = depth; i > 0; --i) free_.push_back(i - 1);
  }

  absl::Status Attach(io::RingLender* lender) override {
    auto engine = make_engine_(lender, static_cast<uint32_t>(slots_.size()));
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    if (max_inflight_ != 0) recheck_ = std::make_unique<io::RingTimer>(lender);
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
    // Requests that waited for the cap take the slots freed above. They
    // reached the engine after its Run(), which is what arms a delay's
    // timer: true asks the channel for another round before it sleeps.
    // The cap is shared with the other queue threads, whose releases do
    // not wake this one: while requests wait, its ring's timer brings it
    // back every kRecheckNs to look again.
    bool started = false;
    while (!waiting_.empty() && Reserve()) {
      Waiting next = std::move(waiting_.front());
      waiting_.pop_front();
      Start(next.op, next.buffer, next.bytes, next.offset,
            std::move(next.reply));
      started = true;
    }
    if (!waiting_.empty()) recheck_->WakeBy(io::MonotonicNowNs() + kRecheckNs);
    return started;
  }
  // As pvdisk's inline placement (--poll-us 50): with I/O in flight while
  // the queue runs at a depth below 2 (a moving average), spin a little for
  // the completion rather than sleep, which saves the thread's wake-up at
  // iodepth 1. With spin=held: spin whenever the engine holds a request,
  // for as long as it takes (a spin ends at the ring's next completion:
  // a new request, a completion, or the delay's timeout). Like the inline
  // placement (BackendLoop::DrivenPollUs), no spin while the engine says
  // a spin cannot see its completion come (io_engine.h: the rbd engine
  // always, the uring engine while a flush is in flight).
  uint32_t PollUs() override {
    if (spin_while_held_) return InFlight() > 0 ? kHeldSpinUs : 0;
    if (!engine_->completes_while_spinning()) return 0;
    return InFlight() > 0 && depth_avg_ < 2 * kAvgScale ? kPollUs : 0;
  }
  void Detach() override {
    recheck_.reset();
    engine_.reset();
    current_ = nullptr;
  }

  // Queues `op` on [offset, offset + bytes) from or into `buffer` (which
  // stays valid until `reply` is sent); answers `reply` when it completes.
  void Queue(io::IoOp op, void* buffer, uint32_t bytes, uint64_t offset,
             Reply reply) {
    if (!waiting_.empty() || !Reserve()) {
      // At the cap: waits for a slot, as a request held on pvdisk's ring.
      waiting_.push_back(Waiting{op, buffer, bytes, offset, std::move(reply)});
      return;
    }
    Start(op, buffer, bytes, offset, std::move(reply));
  }

  // The queue of the calling thread, or null off the queue threads.
  static FloorDiskQueue* current() { return current_; }

 private:
  struct Slot {
    Reply reply;
    io::IoOp op = io::IoOp::kRead;
    iovec iov{};
  };
  // A request that came while max_inflight_ were with the engines.
  struct Waiting {
    io::IoOp op;
    void* buffer;
    uint32_t bytes;
    uint64_t offset;
    Reply reply;
  };
  static constexpr uint32_t kPollUs = 50;
  static constexpr uint32_t kHeldSpinUs = 20'000;
  static constexpr uint32_t kAvgScale = 8;
  static constexpr int64_t kRecheckNs = 20'000;
  static thread_local FloorDiskQueue* current_;

  // Counts one more request with the engines, unless that would pass the
  // cap (then false).
  bool Reserve() {
    uint32_t now = total_->load(std::memory_order_relaxed);
    do {
      if (max_inflight_ != 0 && now >= max_inflight_) return false;
    } while (!total_->compare_exchange_weak(now, now + 1,
                                            std::memory_order_relaxed));
    return true;
  }

  // Hands the request to the engine in a free slot (counted by Reserve).
  void Start(io::IoOp op, void* buffer, uint32_t bytes, uint64_t offset,
             Reply reply) {
    if (free_.empty()) {  // more than the depth
      total_->fetch_sub(1, std::memory_order_relaxed);
      return reply.Error(EIO);
    }
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

  uint32_t InFlight() const {
    return static_cast<uint32_t>(slots_.size() - free_.size());
  }

  // Answers slot `index` with `result` (bytes or a negative errno).
  void Finish(uint32_t index, int64_t result) {
    Slot& slot = slots_[index];
    Reply reply = std::move(slot.reply);
    free_.push_back(index);
    total_->fetch_sub(1, std::memory_order_relaxed);
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
  const uint32_t max_inflight_;  // with all engines at most; 0: no cap
  const bool spin_while_held_;
  std::atomic<uint32_t>* const total_;
  std::unique_ptr<io::RingTimer> recheck_;  // with a cap only
  std::unique_ptr<io::IoEngine> engine_;
  std::vector<Slot> slots_;
  std::deque<Waiting> waiting_;  // beyond max_inflight_, in arrival order
  std::vector<uint32_t> free_;
  std::vector<io::IoCompletion> completions_;
  // The requests in flight when each was queued, averaged (times kAvgScale).
  uint32_t depth_avg_ = 0;
};

thread_local FloorDiskQueue* FloorDiskQueue::current_ = nullptr;

absl::StatusOr<FloorOptions> ParseFloorOptions(
    const std::vector<std::string_view>& words) {
  FloorOptions options;
  for (std::string_view word : words) {
    const absl::string_view text(word.data(), word.size());
    uint32_t number = 0;
    if (text == "engine=uring") {
      options.engine = io::EngineKind::kUring;
    } else if (text == "engine=null") {
      options.engine = io::EngineKind::kNull;
    } else if (absl::StartsWith(text, "max-inflight=") &&
               absl::SimpleAtoi(text.substr(13), &number) && number > 0) {
      options.max_inflight = number;
    } else if (text == "spin=held") {
      options.spin_while_held = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text,
          "' is not an option of IMAGE; allowed: engine=uring|null, "
          "max-inflight=N (N from 1 up), spin=held"));
    }
  }
  return options;
}

absl::StatusOr<std::unique_ptr<FloorDisk>> FloorDisk::Open(
    std::string_view image, uint64_t size, uint32_t depth,
    const FloorOptions& floor_options) {
  auto spec = cli::ParseDiskArg(absl::string_view(image.data(), image.size()));
  if (!spec.ok()) return spec.status();
  if (spec->read_only || spec->expected_size || spec->fault) {
    return absl::InvalidArgumentError(
        "fuse_floor serves an image file or rbd:POOL/IMAGE[,conf=PATH]"
        "[,id=CLIENT][,timeout=SECONDS], with no other option than "
        "delay=US[,delay-write=US]");
  }
  if (spec->rbd && floor_options.engine != io::EngineKind::kUring) {
    return absl::InvalidArgumentError(
        "engine=null serves an image file, not rbd:POOL/IMAGE");
  }
  std::unique_ptr<FloorDisk> disk(new FloorDisk(size, depth, floor_options));
  // As the mount opens it (image/open_image.h), without the image lock.
  image::ImageSpec image_spec = fuse::ImageSpecOf(*spec, floor_options.engine);
  image_spec.lock = false;
  auto opened = image::OpenImage(image_spec);
  if (!opened.ok()) return opened.status();
  disk->image_ = std::move(*opened);
  const uint64_t bytes = disk->image_->size_bytes();
  image::Image* served = disk->image_.get();
  const std::optional<io::CompletionDelay> delay = spec->delay;
  disk->delayed_ = delay.has_value();
  disk->make_engine_ = [served, delay](io::RingLender* lender, uint32_t depth)
      -> absl::StatusOr<std::unique_ptr<io::IoEngine>> {
    io::EngineOptions options;
    options.depth = depth;
    options.ring_lender = lender;
    // The delay model as the inline placement makes it: over the engine,
    // its timer on this queue thread's ring.
    options.delay = delay;
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
  return std::make_unique<FloorDiskQueue>(make_engine_, depth_, options_,
                                          &inflight_);
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
