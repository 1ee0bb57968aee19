#include "transport/backend_loop.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/event_log.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "base/thread.h"
#include "transport/backend_spin.h"
#include "transport/trace_points.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using trace::TraceAction;

constexpr size_t kSectorBytes = 512;

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

// What a format engine did for one request, on its queue's row.
void CountFormat(stats::QueueStats* stats, const io::FormatCounts& counts) {
  if (counts.l2_hits) stats->Add(Counter::l2_hits, counts.l2_hits);
  if (counts.l2_misses) stats->Add(Counter::l2_misses, counts.l2_misses);
  if (counts.meta_reads) stats->Add(Counter::meta_reads, counts.meta_reads);
  if (counts.meta_writes) stats->Add(Counter::meta_writes, counts.meta_writes);
  if (counts.clusters_allocated) {
    stats->Add(Counter::clusters_allocated, counts.clusters_allocated);
  }
  if (counts.cow_bytes) stats->Add(Counter::cow_bytes, counts.cow_bytes);
  if (counts.compressed_reads) {
    stats->Add(Counter::compressed_reads, counts.compressed_reads);
  }
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
  stats->Add(Counter::segments, request.segments.size());
  if (request.indirect) stats->Add(Counter::indirect_reqs);
}

uint64_t Tag(uint32_t queue, uint32_t slot) {
  return (uint64_t{queue} << 32) | slot;
}

// The operation's name in log lines.
const char* BlockOpName(BlockOp op) {
  switch (op) {
    case BlockOp::kRead:
      return "read";
    case BlockOp::kWrite:
      return "write";
    case BlockOp::kFlush:
      return "flush";
    case BlockOp::kDiscard:
      return "discard";
    case BlockOp::kWriteZeroes:
      return "write-zeroes";
  }
  return "request";
}

}  // namespace

absl::StatusOr<std::unique_ptr<BackendLoop>> BackendLoop::Create(
    std::vector<BackendQueue> queues, std::vector<iovec> buffers,
    EngineMaker make_engine, const BackendOptions& options) {
  std::unique_ptr<BackendLoop> loop(new BackendLoop(
      std::move(queues), std::move(buffers), std::move(make_engine), options));
  absl::Status ready = loop->Init(/*watch_kicks=*/true);
  if (!ready.ok()) return ready;
  return loop;
}

absl::StatusOr<std::unique_ptr<BackendLoop>> BackendLoop::CreateDriven(
    std::vector<BackendQueue> queues, std::vector<iovec> buffers,
    EngineMaker make_engine, const BackendOptions& options) {
  std::unique_ptr<BackendLoop> loop(new BackendLoop(
      std::move(queues), std::move(buffers), std::move(make_engine), options));
  loop->driven_ = true;
  absl::Status ready = loop->Init(/*watch_kicks=*/false);
  if (!ready.ok()) return ready;
  return loop;
}

absl::Status BackendLoop::Init(bool watch_kicks) {
  absl::StatusOr<std::unique_ptr<io::IoEngine>> engine = make_engine_();
  if (!engine.ok()) return engine.status();
  engine_ = std::move(*engine);
  engine_mode_ = std::string(engine_->mode());
  if (!buffers_.empty()) engine_->OfferBuffers(buffers_);
  if (!watch_kicks) return absl::OkStatus();
  for (uint32_t q = 0; q < queues_.size(); ++q) {
    PVDISK_RETURN_IF_ERROR(
        engine_->WatchWakeFd(queues_[q].queue.kick->fd(), q));
  }
  return absl::OkStatus();
}

BackendLoop::BackendLoop(std::vector<BackendQueue> queues,
                         std::vector<iovec> buffers, EngineMaker make_engine,
                         const BackendOptions& options)
    : buffers_(std::move(buffers)),
      make_engine_(std::move(make_engine)),
      options_(options) {
  for (const BackendQueue& queue : queues) {
    QueueState state;
    state.queue = queue;
    state.slots.resize(queue.ring_slots);
    for (uint32_t s = queue.ring_slots; s > 0; --s) {
      state.free_slots.push_back(s - 1);
    }
    queues_.push_back(std::move(state));
  }
}

BackendLoop::~BackendLoop() { Stop(); }

void BackendLoop::Start() {
  thread_ = StartThreadWithoutSignals("pvdisk-backend", [this] { Run(); });
}

void BackendLoop::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  queues_[0].queue.kick->Signal();
  thread_.join();
}

bool BackendLoop::AtCap() const {
  return options_.engine_max_inflight != 0 && engine_ != nullptr &&
         engine_->inflight() >= options_.engine_max_inflight;
}

bool BackendLoop::AllIdle() const {
  for (const QueueState& state : queues_) {
    if (state.free_slots.size() != state.slots.size()) return false;
  }
  return true;
}

bool BackendLoop::RequestsWaiting() const {
  for (const QueueState& state : queues_) {
    if (!state.broken && state.queue.ring->HasRequests()) return true;
  }
  return false;
}

bool BackendLoop::MakeEngine() {
  absl::StatusOr<std::unique_ptr<io::IoEngine>> engine = make_engine_();
  if (!engine.ok()) {
    LogInfo("backend cannot make a new engine: %s", engine.status().ToString());
    return false;
  }
  if (!buffers_.empty()) (*engine)->OfferBuffers(buffers_);
  for (uint32_t q = 0; q < queues_.size() && !driven_; ++q) {
    absl::Status watch = (*engine)->WatchWakeFd(queues_[q].queue.kick->fd(), q);
    if (!watch.ok()) {
      LogInfo("backend cannot watch a kick eventfd: %s", watch.ToString());
      return false;
    }
  }
  engine_ = std::move(*engine);
  return true;
}

void BackendLoop::ReplaceEngine(int error) {
  // Destroying the engine waits until the kernel holds none of its requests
  // (see UringEngine's destructor): only then may the pages of the requests
  // it held go back to the frontend, answered with EIO.
  engine_.reset();
  fixed_buffers_.store(false, std::memory_order_relaxed);
  uint64_t held = 0;
  std::vector<std::string> served;
  for (uint32_t q = 0; q < queues_.size(); ++q) {
    QueueState& state = queues_[q];
    served.push_back(absl::StrCat(state.queue.index));
    std::vector<bool> is_free(state.slots.size(), false);
    for (uint32_t index : state.free_slots) is_free[index] = true;
    for (uint32_t index = 0; index < state.slots.size(); ++index) {
      if (!is_free[index]) {
        Answer(q, index, -EIO);
        ++held;
      }
    }
  }
  PublishAll();
  queues_[0].queue.stats->Add(Counter::engine_restarts);
  LogEvent(Event::kEngineRestart, queues_[0].queue.disk,
           absl::StrJoin(served, ","),
           absl::StrCat("the I/O engine failed as a whole (", strerror(-error),
                        "); the ", held,
                        " requests it held are answered EIO and a new engine "
                        "takes over"));
  depth_ewma_ = 0;
  MakeEngine();
}

void BackendLoop::WaitWithoutEngine() {
  // Stop() signals queue 0's kick; other kicks are seen within 100 ms.
  queues_[0].queue.kick->WaitFor(100'000'000);
  MakeEngine();
}

void BackendLoop::AnswerCompletions(
    const std::vector<io::IoCompletion>& completions) {
  for (const io::IoCompletion& completion : completions) {
    if (completion.wake) continue;  // a kick: the next round sees it
    Answer(static_cast<uint32_t>(completion.tag >> 32),
           static_cast<uint32_t>(completion.tag & 0xffffffffu),
           static_cast<int>(completion.result < 0 ? completion.result : 0));
  }
}

int BackendLoop::MapSlot(QueueState& state, Slot& slot) {
  const std::vector<DataSegment>& segments = slot.request.segments;
  slot.iov.clear();
  slot.mappings.clear();
  size_t i = 0;
  while (i < segments.size()) {
    // A run of consecutive pages is mapped at once.
    size_t j = i;
    while (j + 1 < segments.size() &&
           segments[j + 1].page == segments[j].page + 1) {
      ++j;
    }
    PageMapping mapping;
    if (!state.queue.grants->MapPages(
            segments[i].page, static_cast<uint32_t>(j - i + 1), &mapping)) {
      return -ENOMEM;
    }
    slot.mappings.push_back(mapping);
    for (size_t k = i; k <= j; ++k) {
      uint8_t* base = mapping.address + (k - i) * kPageSize +
                      size_t{segments[k].first_sector} * kSectorBytes;
      size_t length =
          size_t{segments[k].last_sector - segments[k].first_sector + 1u} *
          kSectorBytes;
      if (!slot.iov.empty()) {
        iovec& last = slot.iov.back();
        if (static_cast<uint8_t*>(last.iov_base) + last.iov_len == base) {
          last.iov_len += length;
          continue;
        }
      }
      slot.iov.push_back(iovec{base, length});
    }
    i = j + 1;
  }
  return 0;
}

int BackendLoop::Bounce(Slot& slot) {
  size_t bytes = slot.request.num_sectors * kSectorBytes;
  void* memory = nullptr;
  // Page-aligned, as O_DIRECT needs.
  if (posix_memalign(&memory, kPageSize, bytes) != 0) return -ENOMEM;
  slot.bounce.reset(static_cast<uint8_t*>(memory));
  slot.bounce_iov = iovec{memory, bytes};
  if (slot.request.op == BlockOp::kWrite) {
    uint8_t* at = slot.bounce.get();
    for (const iovec& piece : slot.iov) {
      std::memcpy(at, piece.iov_base, piece.iov_len);
      at += piece.iov_len;
    }
  }
  return 0;
}

bool BackendLoop::TakeRequests(uint32_t q) {
  QueueState& state = queues_[q];
  stats::QueueStats* stats = state.queue.stats;
  while (!state.free_slots.empty() && !state.broken) {
    if (AtCap()) return true;
    uint32_t index = state.free_slots.back();
    Slot& slot = state.slots[index];
    switch (state.queue.ring->TakeRequest(&slot.request)) {
      case TakeResult::kNone:
        return false;
      case TakeResult::kRingBroken:
        stats->Add(Counter::invalid_reqs);
        state.broken = true;
        LogEvent(Event::kRingBroken, state.queue.disk,
                 absl::StrCat(state.queue.index),
                 "the frontend published an impossible request index; the "
                 "ring is no longer served and its requests fail with EIO");
        return false;
      case TakeResult::kInvalid:
        stats->Add(Counter::invalid_reqs);
        LogEvent(
            Event::kInvalidRequest, state.queue.disk,
            absl::StrCat(state.queue.index),
            absl::StrCat("request id ", slot.request.id, " (operation code ",
                         static_cast<int>(slot.request.wire_op),
                         ") failed validation; answered EINVAL"));
        state.queue.ring->PutResponse(slot.request, -EINVAL);
        state.has_responses = true;
        continue;
      case TakeResult::kUnsupported:
        state.queue.ring->PutResponse(slot.request, -EOPNOTSUPP);
        state.has_responses = true;
        continue;
      case TakeResult::kAnswered:  // the ring answered it itself
        state.has_responses = true;
        continue;
      case TakeResult::kValid:
        break;
    }
    state.free_slots.pop_back();
    TraceRequest(state, slot.request, TraceAction::kTake);
    CountRequest(stats, slot.request);
    bool is_data =
        slot.request.op == BlockOp::kRead || slot.request.op == BlockOp::kWrite;
    if (is_data) {
      int mapped = MapSlot(state, slot);
      // A valid request the engine cannot take in pieces goes as one copy.
      if (mapped == 0 && slot.iov.size() > size_t{io::kMaxIovecs}) {
        mapped = Bounce(slot);
        stats->Add(Counter::bounced_reqs);
      }
      if (mapped < 0) {
        Answer(q, index, mapped);
        continue;
      }
    }
    if (engine_ == nullptr) {  // none could be made: see WaitWithoutEngine
      Answer(q, index, -EIO);
      continue;
    }
    io::IoRequest io_request;
    io_request.op = ToIoOp(slot.request.op);
    io_request.offset = slot.request.sector * kSectorBytes;
    io_request.length = slot.request.num_sectors * kSectorBytes;
    io_request.iov = slot.bounce ? &slot.bounce_iov : slot.iov.data();
    io_request.iov_count = !is_data      ? 0
                           : slot.bounce ? 1
                                         : static_cast<int>(slot.iov.size());
    io_request.tag = Tag(q, index);
    io_request.buffer_index =
        slot.iov.size() == 1 && !slot.bounce && InPool(state, slot.iov[0])
            ? state.queue.buffer_index
            : -1;
    // Recorded before: an engine may answer within Queue().
    TraceRequest(state, slot.request, TraceAction::kEngineQueued);
    int queued = engine_->Queue(io_request);
    if (io::FormatCounts counts; engine_->TakeFormatCounts(counts)) {
      CountFormat(stats, counts);
    }
    if (queued < 0) {
      Answer(q, index, queued);
    } else {
      stats->RaiseMax(Counter::engine_inflight_max, engine_->inflight());
      RecordDepth();
    }
  }
  return false;
}

bool BackendLoop::InPool(const QueueState& state, const iovec& iov) const {
  // Only the pool: lent pages (lent_memory.h) are not in it; the engine
  // asks its ring's lender for those (io/ring_lender.h, FixedBufferFor).
  const int index = state.queue.buffer_index;
  if (index < 0 || static_cast<size_t>(index) >= buffers_.size()) return false;
  auto begin = reinterpret_cast<uintptr_t>(buffers_[index].iov_base);
  auto at = reinterpret_cast<uintptr_t>(iov.iov_base);
  return at >= begin && at - begin + iov.iov_len <= buffers_[index].iov_len;
}

void BackendLoop::Answer(uint32_t q, uint32_t index, int result) {
  QueueState& state = queues_[q];
  Slot& slot = state.slots[index];
  if (slot.bounce) {
    if (result >= 0 && slot.request.op == BlockOp::kRead) {
      const uint8_t* at = slot.bounce.get();
      for (const iovec& piece : slot.iov) {
        std::memcpy(piece.iov_base, at, piece.iov_len);
        at += piece.iov_len;
      }
    }
    slot.bounce.reset();
  }
  for (const PageMapping& mapping : slot.mappings) {
    state.queue.grants->UnmapPages(mapping);
  }
  slot.mappings.clear();
  if (result < 0) {
    state.queue.stats->Add(Counter::errors);
    LogEvent(Event::kIoError, state.queue.disk, absl::StrCat(state.queue.index),
             absl::StrCat(BlockOpName(slot.request.op), " of ",
                          slot.request.num_sectors, " sectors at sector ",
                          slot.request.sector, " failed: ", strerror(-result)));
  }
  TraceRequest(state, slot.request, TraceAction::kEngineDone,
               result < 0 ? trace::kFailedFlag : 0);
  state.queue.ring->PutResponse(slot.request, result < 0 ? result : 0);
  state.free_slots.push_back(index);
  state.has_responses = true;
}

void BackendLoop::TraceRequest(const QueueState& state,
                               const DeviceRequest& request,
                               trace::TraceAction action, uint8_t flags) {
  TracePoint(state.queue.trace, action, request.op, request.sector,
             request.num_sectors, nullptr, static_cast<uint32_t>(request.id),
             flags);
}

void BackendLoop::PublishAll() {
  for (QueueState& state : queues_) {
    if (!state.has_responses) continue;
    state.has_responses = false;
    PushResult pushed = state.queue.ring->PublishResponses();
    if (pushed == PushResult::kNotify) {
      state.queue.stats->Add(Counter::irqs_sent);
      TraceInstant(state.queue.trace, TraceAction::kInterrupt);
      if (state.queue.inline_interrupts != nullptr) {
        state.queue.inline_interrupts->HandleInterrupt();
      } else {
        state.queue.irq->Signal();
      }
    } else if (pushed == PushResult::kSuppressed) {
      state.queue.stats->Add(Counter::irqs_suppressed);
    }
  }
}

void BackendLoop::ReportStoppedRings() {
  for (QueueState& state : queues_) {
    if (!state.broken || state.stop_reported ||
        state.free_slots.size() != state.slots.size()) {
      continue;
    }
    state.stop_reported = true;
    if (state.queue.frontend != nullptr) state.queue.frontend->OnRingStopped();
  }
}

bool BackendLoop::FinalChecks() {
  bool more = false;
  for (QueueState& state : queues_) {
    if (state.broken || state.free_slots.empty()) continue;
    if (state.queue.ring->FinalCheckForRequests()) {
      state.queue.stats->Add(Counter::final_check_again);
      more = true;
    }
  }
  return more;
}

bool BackendLoop::OneAtATime() const {
  return depth_ewma_ < kPollDepthLimit * kEwmaScale;
}

bool BackendLoop::ShouldPoll() const {
  // The decision and its reasons: transport/backend_spin.h.
  BackendSpinInputs in;
  in.poll_us = options_.poll_us;
  in.one_at_a_time = OneAtATime();
  in.on_kicker_cpu = follow_.cpu() != KickFollow::kAnyCpu;
  if (engine_ != nullptr) {
    in.inflight = engine_->inflight();
    in.completes_while_spinning = engine_->completes_while_spinning();
  }
  return engine_ != nullptr && BackendShouldSpin(in);
}

void BackendLoop::FollowKicks(BackendAffinity& affinity) {
  int kick_cpu = KickFollow::kAnyCpu;
  for (QueueState& state : queues_) {
    const EventFd::SignalSource source = state.queue.kick->LastSignal();
    if (source.count == state.kicks_seen) continue;
    state.kicks_seen = source.count;
    kick_cpu = source.cpu;
  }
  if (follow_.Round(OneAtATime(), kick_cpu)) affinity.Apply(follow_.cpu());
}

uint32_t BackendLoop::DrivenPollUs() const {
  // Only for a completion already on its way: with nothing in flight the
  // next event is a new FUSE request, whose submitter runs on the driver's
  // own CPU (the kernel queues a request on its caller's CPU) and could not
  // run while the driver spins there. (Measured: spinning for the next
  // request too gained nothing at rr4k_qd1, 2026-12-02.)
  // Nor while the completion needs another thread on this CPU first (a
  // flush: io/spin_policy.h, or an rbd request): ShouldPoll asks the engine.
  if (!driven_ || engine_ == nullptr || engine_->inflight() == 0) return 0;
  return ShouldPoll() ? options_.poll_us : 0;
}

void BackendLoop::CountPollHit() {
  for (QueueState& state : queues_) state.queue.stats->Add(Counter::polls_hit);
}

void BackendLoop::RecordDepth() {
  // depth_ewma_ += (inflight - depth_ewma_) / 8, in 1/kEwmaScale units.
  int64_t sample = int64_t{engine_->inflight()} * kEwmaScale;
  depth_ewma_ += (sample - depth_ewma_) / 8;
}

bool BackendLoop::Poll(std::vector<io::IoCompletion>& completions) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::microseconds(options_.poll_us);
  do {
    // Submits what TakeRequests() queued and reaps what finished, so that
    // polling never holds back requests already taken. A failed engine is
    // left to the Run() that follows the poll.
    int got = engine_->Run(/*wait=*/false, completions);
    if (got < 0) return true;
    // Progress without a completion (io_engine.h) is no hit: its follow-up
    // I/O is queued, and the next turn submits it and looks again.
    if (!completions.empty()) {
      const io::IoCompletion& first = completions.front();
      uint32_t q =
          static_cast<uint32_t>(first.wake ? first.tag : first.tag >> 32);
      if (q < queues_.size()) queues_[q].queue.stats->Add(Counter::polls_hit);
      return true;
    }
    for (QueueState& state : queues_) {
      if (!state.broken && !state.free_slots.empty() &&
          state.queue.ring->HasRequests()) {
        state.queue.stats->Add(Counter::polls_hit);
        return true;
      }
    }
  } while (std::chrono::steady_clock::now() < deadline &&
           !stop_.load(std::memory_order_relaxed));
  return false;
}

bool BackendLoop::RunRound() {
  // A few passes at most: a synchronous engine (sync, null) completes within
  // Run(), and each answer frees a slot for what waits on the ring; past
  // that the driver's own work should get its turn.
  constexpr int kMaxPasses = 4;
  std::vector<io::IoCompletion>& completions = round_completions_;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    if (engine_ == nullptr) MakeEngine();  // requests meanwhile get EIO
    bool capped = false;
    for (uint32_t q = 0; q < queues_.size(); ++q) {
      capped |= TakeRequests(q);
    }
    completions.clear();
    int got =
        engine_ == nullptr ? 0 : engine_->Run(/*wait=*/false, completions);
    if (got < 0) {
      AnswerCompletions(completions);
      ReplaceEngine(got);
      continue;
    }
    if (engine_ != nullptr) {
      fixed_buffers_.store(engine_->uses_fixed_buffers(),
                           std::memory_order_relaxed);
    }
    AnswerCompletions(completions);
    // Interrupts run inline here and may push new requests: the final
    // checks below see them.
    PublishAll();
    ReportStoppedRings();
    // Work, not idle: answers freed slots (take again), or the engine made
    // progress without a completion (io_engine.h): it consumed completions
    // of its own I/O and queued follow-up I/O, which the next Run() may
    // have to submit or complete (a synchronous inner engine finishes it
    // inside Queue() and returns it only from Run()). Past kMaxPasses the
    // round says so to its driver, which calls again before sleeping.
    if (got > 0) continue;
    if (capped || AtCap()) return false;  // only a completion lets more in
    if (!FinalChecks()) return false;
  }
  return true;
}

void BackendLoop::Run() {
  std::vector<io::IoCompletion> completions;
  BackendAffinity affinity;  // the CPUs this thread was started with
  for (;;) {
    bool capped = false;
    for (uint32_t q = 0; q < queues_.size(); ++q) {
      capped |= TakeRequests(q);
    }
    // May run interrupt handlers inline, which may push new requests: the
    // stop rule below looks at the rings after it.
    PublishAll();
    ReportStoppedRings();
    if (stop_.load(std::memory_order_acquire) && AllIdle() &&
        !RequestsWaiting()) {
      return;
    }
    if (engine_ == nullptr) {
      WaitWithoutEngine();
      continue;
    }
    // Before sleeping: poll a while if asked, then ask every ring to kick us
    // for its next request and look once more. At the cap there is no point:
    // only a completion can let us take more.
    completions.clear();
    bool more = false;
    if (!capped && !AtCap()) {
      more = (ShouldPoll() && Poll(completions)) || FinalChecks();
    }
    // A round whose Run() made progress without a completion (io_engine.h)
    // comes round here again: this Run() submits the follow-up I/O before
    // it waits.
    int got = engine_->Run(/*wait=*/!more && completions.empty(), completions);
    if (got < 0) {
      // Completions a poll reaped before the failure are real results.
      AnswerCompletions(completions);
      ReplaceEngine(got);
      continue;
    }
    fixed_buffers_.store(engine_->uses_fixed_buffers(),
                         std::memory_order_relaxed);
    AnswerCompletions(completions);
    FollowKicks(affinity);
  }
}

}  // namespace pvdisk::transport
