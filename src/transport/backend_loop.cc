#include "transport/backend_loop.h"

#include <cerrno>

#include "base/log.h"
#include "base/thread.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;

constexpr uint64_t kKickTag = 0;

io::IoOp ToIoOp(BlockOp op) {
  switch (op) {
    case BlockOp::kRead:
      return io::IoOp::kRead;
    case BlockOp::kWrite:
      return io::IoOp::kWrite;
    case BlockOp::kFlush:
      return io::IoOp::kFlush;
    case BlockOp::kDiscard:
      return io::IoOp::kDiscard;
    case BlockOp::kWriteZeroes:
      return io::IoOp::kWriteZeroes;
  }
  return io::IoOp::kRead;
}

void CountRequest(stats::QueueStats* stats, const DeviceRequest& request) {
  switch (request.op) {
    case BlockOp::kRead:
      stats->Add(Counter::reqs_read);
      stats->Add(Counter::sectors_read, request.num_sectors);
      break;
    case BlockOp::kWrite:
      stats->Add(Counter::reqs_write);
      stats->Add(Counter::sectors_written, request.num_sectors);
      break;
    case BlockOp::kFlush:
      stats->Add(Counter::reqs_flush);
      break;
    case BlockOp::kDiscard:
    case BlockOp::kWriteZeroes:
      stats->Add(Counter::reqs_discard);
      break;
  }
  stats->Add(Counter::segments, request.segment_count);
}

}  // namespace

BackendLoop::BackendLoop(std::unique_ptr<DeviceRing> ring,
                         std::unique_ptr<io::IoEngine> engine,
                         uint32_t max_inflight, EventFd* kick, EventFd* irq,
                         stats::QueueStats* stats)
    : ring_(std::move(ring)),
      engine_(std::move(engine)),
      kick_(kick),
      irq_(irq),
      stats_(stats),
      slots_(max_inflight) {
  free_slots_.reserve(max_inflight);
  for (uint32_t s = max_inflight; s > 0; --s) free_slots_.push_back(s - 1);
}

BackendLoop::~BackendLoop() { Stop(); }

void BackendLoop::Start() {
  thread_ = StartThreadWithoutSignals([this] { Run(); });
}

void BackendLoop::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  kick_->Signal();
  thread_.join();
}

bool BackendLoop::TakeRequests() {
  while (!free_slots_.empty()) {
    uint32_t slot = free_slots_.back();
    DeviceRequest& request = slots_[slot];
    TakeResult taken = ring_->TakeRequest(&request);
    switch (taken) {
      case TakeResult::kNone:
        return true;
      case TakeResult::kRingBroken:
        stats_->Add(Counter::invalid_reqs);
        return false;
      case TakeResult::kInvalid:
        stats_->Add(Counter::invalid_reqs);
        ring_->PutResponse(request, -EINVAL);
        continue;
      case TakeResult::kUnsupported:
        ring_->PutResponse(request, -EOPNOTSUPP);
        continue;
      case TakeResult::kValid:
        break;
    }
    free_slots_.pop_back();
    CountRequest(stats_, request);
    io::IoRequest io_request;
    io_request.op = ToIoOp(request.op);
    io_request.offset = request.sector * kSectorSize;
    io_request.length = request.num_sectors * kSectorSize;
    io_request.iov = request.iov.data();
    io_request.iov_count = static_cast<int>(request.iov.size());
    io_request.tag = slot;
    int queued = engine_->Queue(io_request);
    if (queued < 0) {
      Answer(slot, queued);
    } else {
      stats_->RaiseMax(Counter::engine_inflight_max, engine_->inflight());
    }
  }
  return true;
}

void BackendLoop::Answer(uint32_t slot, int result) {
  if (result < 0) stats_->Add(Counter::errors);
  ring_->PutResponse(slots_[slot], result < 0 ? result : 0);
  free_slots_.push_back(slot);
}

void BackendLoop::Publish() {
  PushResult pushed = ring_->PublishResponses();
  if (pushed == PushResult::kNotify) {
    stats_->Add(Counter::irqs_sent);
    irq_->Signal();
  } else if (pushed == PushResult::kSuppressed) {
    stats_->Add(Counter::irqs_suppressed);
  }
}

void BackendLoop::Run() {
  absl::Status watch = engine_->WatchWakeFd(kick_->fd(), kKickTag);
  if (!watch.ok()) {
    // Without a kick the loop could sleep forever; say why and give up: the
    // frontend's requests then wait, and unmount still works.
    LogInfo("backend cannot watch its kick eventfd: %s", watch.ToString());
    return;
  }
  std::vector<io::IoCompletion> completions;
  for (;;) {
    bool more = false;
    if (!broken_) {
      broken_ = !TakeRequests();
      // Before sleeping, ask to be kicked for the next request; if one
      // slipped in meanwhile, go round again instead of sleeping.
      if (!broken_ && !free_slots_.empty()) {
        more = ring_->FinalCheckForRequests();
        if (more) stats_->Add(Counter::final_check_again);
      }
    }
    Publish();
    if (stop_.load(std::memory_order_acquire) &&
        free_slots_.size() == slots_.size() && !more) {
      return;
    }
    completions.clear();
    int got = engine_->Run(/*wait=*/!more, completions);
    if (got < 0) {
      LogInfo("backend engine failed: errno %d", -got);
      return;
    }
    for (const io::IoCompletion& completion : completions) {
      if (completion.wake) continue;  // a kick: the next TakeRequests sees it
      Answer(static_cast<uint32_t>(completion.tag),
             static_cast<int>(completion.result < 0 ? completion.result : 0));
    }
  }
}

}  // namespace pvdisk::transport
