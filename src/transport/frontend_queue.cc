#include "transport/frontend_queue.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/thread.h"
#include "io/io_engine.h"
#include "stats/clock.h"
#include "transport/trace_points.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using trace::TraceAction;

// How far back a new request looks for a merge partner in the staging
// queue (blk-mq's "hand-wavy stop count of 8").
constexpr size_t kMergeLookback = 8;

// Every timestamp here is on the stats clock: pushed_ns feeds inflight_ns,
// which `pvdisk stat` divides by the stats clock's elapsed time.
uint64_t NowNs() { return stats::MonotonicNanos(); }

bool IsData(BlockOp op) {
  return op == BlockOp::kRead || op == BlockOp::kWrite;
}

// Whether `next` continues `previous` in memory: the backend then carries
// both in one iovec (it joins consecutive pages; see BackendLoop::MapSlot).
bool Continues(const DataSegment& previous, const DataSegment& next) {
  return previous.last_sector == kSectorsPerPage - 1 &&
         next.first_sector == 0 && next.page == previous.page + 1;
}

// Whether `next` may follow `previous` in a gapless request
// (DriverRing::NeedsGaplessSegments), in any page.
bool Gapless(const DataSegment& previous, const DataSegment& next) {
  return previous.last_sector == kSectorsPerPage - 1 && next.first_sector == 0;
}

// Iovecs of `first` followed by `second` (both non-empty).
uint32_t JoinedIovecs(absl::Span<const DataSegment> first_segments,
                      uint32_t first_iovecs,
                      absl::Span<const DataSegment> second_segments,
                      uint32_t second_iovecs) {
  bool joined = Continues(first_segments.back(), second_segments.front());
  return first_iovecs + second_iovecs - (joined ? 1 : 0);
}

}  // namespace

FrontendQueue::FrontendQueue(std::unique_ptr<DriverRing> ring,
                             uint8_t* data_memory, const FrontendLayout& layout,
                             const QueuePolicy& policy, EventFd* kick,
                             EventFd* irq, stats::QueueStats* stats)
    : data_(data_memory),
      layout_(layout),
      policy_(policy),
      sectors_per_request_(layout.max_segments * kSectorsPerPage),
      max_discard_sectors_(ring->MaxRangeSectors(BlockOp::kDiscard)),
      max_write_zeroes_sectors_(ring->MaxRangeSectors(BlockOp::kWriteZeroes)),
      kick_(kick),
      irq_(irq),
      stats_(stats),
      ring_(std::move(ring)),
      pool_(layout.pool_pages),
      shadow_(layout.ring_slots) {
  free_ids_.reserve(layout.ring_slots);
  for (uint32_t id = layout.ring_slots; id > 0; --id) {
    free_ids_.push_back(id - 1);
  }
  table_pages_.reserve(layout.table_pages_per_request);
}

FrontendQueue::~FrontendQueue() { Stop(); }

void FrontendQueue::Start() {
  completion_thread_ =
      StartThreadWithoutSignals("pvdisk-irq", [this] { CompletionLoop(); });
}

uint64_t FrontendQueue::SectorsPerChild(BlockOp op) const {
  switch (op) {
    case BlockOp::kRead:
    case BlockOp::kWrite:
      return sectors_per_request_;
    case BlockOp::kDiscard:
      return max_discard_sectors_;
    case BlockOp::kWriteZeroes:
      return max_write_zeroes_sectors_;
    case BlockOp::kFlush:
      break;
  }
  return UINT64_MAX;
}

uint64_t FrontendQueue::ChildSectors(const BlockIo* io, uint32_t child) const {
  uint64_t per_child = SectorsPerChild(io->op);
  uint64_t first = uint64_t{child} * per_child;
  return std::min<uint64_t>(per_child, io->num_sectors - first);
}

void FrontendQueue::Submit(BlockIo* io) {
  BlockIo::QueueState& state = io->state_;
  state.Reset();
  if (io->op == BlockOp::kWrite && io->sector == 0 &&
      policy_.refuse_first_sector != nullptr &&
      policy_.refuse_first_sector(io->write_data)) {
    stats_->Add(Counter::refused_header_writes);
    io->Complete(-EPERM, {});
    return;
  }
  bool is_data = IsData(io->op);
  // Data in pieces of max_segments pages; discard and write-zeroes ranges in
  // pieces the protocol's range field holds (both counted as `splits`).
  // Any child count fits 32 bits: the smallest piece is 11 pages.
  const uint64_t per_child = SectorsPerChild(io->op);
  state.children =
      io->op == BlockOp::kFlush || io->num_sectors == 0
          ? 1
          : static_cast<uint32_t>(io->num_sectors / per_child +
                                  (io->num_sectors % per_child != 0));
  if (is_data) {
    state.lent =
        layout_.lent.Holds(LentData(io), io->num_sectors * kSectorSize);
    // A BlockIo the pool can never hold would wait forever: each child's
    // run (rounded up to a power of two) must fit, and a read keeps all its
    // runs until it is answered. pool_.pages() never changes, so reading it
    // unlocked is safe.
    uint64_t run = PagePool::RunPages(PagesFor(ChildSectors(io, 0)));
    uint64_t held_at_once = io->op == BlockOp::kRead ? state.children : 1;
    if (!state.lent && run * held_at_once > pool_.pages()) {
      io->Complete(-EINVAL, {});
      return;
    }
    state.first_pages.resize(state.children);
    if (state.lent) stats_->Add(Counter::zero_copy_ios);
  }
  if (state.children > 1) stats_->Add(Counter::splits, state.children - 1);

  bool kick;
  bool wake_timer = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (ring_stopped_) {
      lock.unlock();
      io->Complete(-EIO, {});
      return;
    }
    ++outstanding_;
    uint64_t now = policy_.plug_us > 0 ? NowNs() : 0;
    // FIFO for pages: a new BlockIo may not overtake one waiting for them.
    // One on lent pages needs none of the pool and never waits.
    if ((!state.lent && !page_wait_.empty()) || !PrepareChildren(io, now)) {
      StageWriteData(io);
      page_wait_.push_back(io);
    }
    kick = Pump(now);
    if (state.dispatched < state.children) {
      // Still off the ring: held by the plug while the ring has room, or
      // waiting for room (or pages).
      bool ring_has_room = !free_ids_.empty() && ring_->FreeSlots() > 0;
      if (policy_.plug_us > 0 && page_wait_.empty() && ring_has_room) {
        stats_->Add(Counter::plugs);
      } else {
        stats_->Add(Counter::ring_full);
      }
    }
    wake_timer = NeedsTimerWake(now);
  }
  if (kick) Kick();
  if (wake_timer) irq_->Signal();
}

const uint8_t* FrontendQueue::LentData(const BlockIo* io) {
  return io->op == BlockOp::kWrite ? io->write_data : io->read_into;
}

uint8_t* FrontendQueue::PageAddress(uint32_t page) const {
  if (page >= layout_.lent_first_page && !layout_.lent.empty()) {
    return layout_.lent.base +
           size_t{page - layout_.lent_first_page} * kPageSize;
  }
  return data_ + size_t{page} * kPageSize;
}

void FrontendQueue::FreeRun(uint32_t first_page, uint32_t pages) {
  if (first_page < layout_.pool_pages) pool_.Free(first_page, pages);
}

void FrontendQueue::StageWriteData(BlockIo* io) {
  BlockIo::QueueState& state = io->state_;
  if (io->op != BlockOp::kWrite || state.staged_data) return;
  uint64_t from = uint64_t{state.prepared} * sectors_per_request_;
  size_t bytes = (io->num_sectors - from) * kSectorSize;
  state.staged_data = std::make_unique<uint8_t[]>(bytes);
  std::memcpy(state.staged_data.get(), io->write_data + from * kSectorSize,
              bytes);
  state.staged_from_sector = from;
}

bool FrontendQueue::PrepareChildren(BlockIo* io, uint64_t now_ns) {
  BlockIo::QueueState& state = io->state_;
  while (state.prepared < state.children) {
    uint32_t child = state.prepared;
    Pending pending;
    pending.op = io->op;
    pending.staged_ns = now_ns;
    pending.members.push_back(Member{io, child});
    if (IsData(io->op)) {
      uint64_t first = uint64_t{child} * sectors_per_request_;
      uint64_t count = ChildSectors(io, child);
      uint32_t pages = PagesFor(count);
      std::optional<uint32_t> first_page;
      if (state.lent) {
        // The data stays where it is; a child starts on a page boundary
        // (max_segments whole pages per child).
        first_page = layout_.lent_first_page +
                     layout_.lent.PageOf(LentData(io) + first * kSectorSize);
      } else {
        first_page = pool_.Allocate(pages);
        if (!first_page) return false;
        if (io->op == BlockOp::kWrite) {
          const uint8_t* source =
              state.staged_data
                  ? state.staged_data.get() +
                        (first - state.staged_from_sector) * kSectorSize
                  : io->write_data + first * kSectorSize;
          std::memcpy(PageAddress(*first_page), source, count * kSectorSize);
        }
      }
      state.first_pages[child] = *first_page;
      pending.sector = io->sector + first;
      pending.num_sectors = count;
      pending.iovecs = 1;  // one run of pages
      // Whole pages from the start of the run; the last may be partial.
      pending.segments.reserve(pages);
      for (uint64_t done = 0; done < count; done += kSectorsPerPage) {
        uint64_t in_page = std::min<uint64_t>(kSectorsPerPage, count - done);
        pending.segments.push_back(DataSegment{
            *first_page + static_cast<uint32_t>(done / kSectorsPerPage), 0,
            static_cast<uint8_t>(in_page - 1)});
      }
    } else {
      pending.sector =
          io->op == BlockOp::kFlush
              ? io->sector
              : io->sector + uint64_t{child} * SectorsPerChild(io->op);
      pending.num_sectors = ChildSectors(io, child);
    }
    ++state.prepared;
    TracePoint(trace_, TraceAction::kQueue, pending.op, pending.sector,
               pending.num_sectors, io);
    Stage(std::move(pending));
  }
  state.staged_data.reset();
  return true;
}

void FrontendQueue::Stage(Pending pending) {
  if (policy_.merge && policy_.dispatch == DispatchMode::kWhenRoom &&
      IsData(pending.op) && TryMerge(pending)) {
    return;
  }
  // A ring request of its own (blktrace's G), inserted (I).
  TracePoint(trace_, TraceAction::kGetRequest, pending.op, pending.sector,
             pending.num_sectors, pending.members.front().io);
  TracePoint(trace_, TraceAction::kInsert, pending.op, pending.sector,
             pending.num_sectors, pending.members.front().io);
  if (policy_.dispatch == DispatchMode::kAlways) {
    // Straight out of the staging queue: nothing can merge into it now.
    dispatch_list_.push_back(std::move(pending));
    return;
  }
  staging_.push_back(std::move(pending));
}

bool FrontendQueue::TryMerge(Pending& pending) {
  size_t looked = 0;
  for (size_t i = staging_.size(); i > 0 && looked < kMergeLookback;
       --i, ++looked) {
    Pending& staged = staging_[i - 1];
    if (staged.op != pending.op) continue;
    if (staged.segments.size() + pending.segments.size() >
            layout_.max_segments ||
        staged.num_sectors + pending.num_sectors > sectors_per_request_) {
      continue;
    }
    bool back = staged.sector + staged.num_sectors == pending.sector;
    bool front = pending.sector + pending.num_sectors == staged.sector;
    if (!back && !front) continue;
    if (ring_->NeedsGaplessSegments() &&
        !Gapless(back ? staged.segments.back() : pending.segments.back(),
                 back ? pending.segments.front() : staged.segments.front())) {
      continue;
    }
    // The engine takes at most io::kMaxIovecs iovecs per request; a merged
    // request beyond that would fail (or cost the backend a copy).
    uint32_t iovecs = back ? JoinedIovecs(staged.segments, staged.iovecs,
                                          pending.segments, pending.iovecs)
                           : JoinedIovecs(pending.segments, pending.iovecs,
                                          staged.segments, staged.iovecs);
    if (iovecs > static_cast<uint32_t>(io::kMaxIovecs)) continue;
    TracePoint(trace_,
               back ? TraceAction::kBackMerge : TraceAction::kFrontMerge,
               pending.op, pending.sector, pending.num_sectors,
               pending.members.front().io);
    staged.iovecs = iovecs;
    if (back) {
      staged.segments.insert(staged.segments.end(), pending.segments.begin(),
                             pending.segments.end());
      staged.members.insert(staged.members.end(), pending.members.begin(),
                            pending.members.end());
    } else {
      pending.segments.insert(pending.segments.end(), staged.segments.begin(),
                              staged.segments.end());
      staged.segments = std::move(pending.segments);
      pending.members.insert(pending.members.end(), staged.members.begin(),
                             staged.members.end());
      staged.members = std::move(pending.members);
      staged.sector = pending.sector;
    }
    staged.num_sectors += pending.num_sectors;
    stats_->Add(pending.op == BlockOp::kRead ? Counter::merges_read
                                             : Counter::merges_write);
    return true;
  }
  return false;
}

bool FrontendQueue::CanWrite(const Pending& pending) const {
  return !free_ids_.empty() &&
         ring_->HasRoomFor(pending.op,
                           static_cast<uint32_t>(pending.segments.size()));
}

void FrontendQueue::WriteToRing(Pending& pending) {
  uint32_t id = free_ids_.back();
  free_ids_.pop_back();
  for (const Member& member : pending.members) {
    ++member.io->state_.dispatched;
  }
  Shadow& shadow = shadow_[id];
  shadow.op = pending.op;
  shadow.sector = pending.sector;
  shadow.num_sectors = pending.num_sectors;
  shadow.segments = std::move(pending.segments);
  shadow.members = std::move(pending.members);
  shadow.in_use = true;
  shadow.pushed_ns = NowNs();
  if (trace_->on()) TraceShadow(TraceAction::kIssue, id, 0);
  WriteShadow(id);
  stats_->Add(Counter::inflight);
}

void FrontendQueue::TraceShadow(TraceAction action, uint32_t id,
                                uint8_t flags) {
  const Shadow& shadow = shadow_[id];
  uint8_t lead = trace::kLeadFlag;
  for (const Member& member : shadow.members) {
    TracePoint(trace_, action, shadow.op, shadow.sector, shadow.num_sectors,
               member.io, id, static_cast<uint8_t>(flags | lead));
    lead = 0;
  }
}

void FrontendQueue::WriteShadow(uint32_t id) {
  const Shadow& shadow = shadow_[id];
  // This id's table pages, for a protocol that needs them.
  table_pages_.clear();
  for (uint32_t t = 0; t < layout_.table_pages_per_request; ++t) {
    table_pages_.push_back(layout_.pool_pages +
                           id * layout_.table_pages_per_request + t);
  }
  RingRequest request;
  request.op = shadow.op;
  request.id = id;
  request.sector = shadow.sector;
  request.num_sectors = shadow.num_sectors;
  request.segments = shadow.segments.data();
  request.segment_count = static_cast<uint32_t>(shadow.segments.size());
  request.table_pages = table_pages_.data();
  request.table_page_count = layout_.table_pages_per_request;
  ring_->Write(request);
}

void FrontendQueue::Reconnect(
    absl::FunctionRef<std::unique_ptr<DriverRing>()> fresh_ring) {
  std::vector<BlockIo*> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ring_stopped_) return;
    // Responses the dead backend published are real results. Unpublished
    // ones are lost with it: those requests are simply written again.
    ring_->ConsumeResponses(
        [&](uint64_t id, int result) { OnResponse(id, result, &done); });
    ring_ = fresh_ring();
    // Every request in flight fitted into the old ring at once, so all fit
    // into the empty new one.
    for (uint32_t id = 0; id < shadow_.size(); ++id) {
      if (!shadow_[id].in_use) continue;
      WriteShadow(id);
      stats_->Add(Counter::reissued_reqs);
    }
    uint64_t now = policy_.plug_us > 0 ? NowNs() : 0;
    Pump(now);
  }
  // Always kick: the new backend must look at the ring whatever the
  // notification rule said.
  Kick();
  Finish(done);
}

void FrontendQueue::DispatchStaging(uint64_t now_ns) {
  // Requests already out of the staging queue go first (kAlways).
  while (!dispatch_list_.empty()) {
    if (!CanWrite(dispatch_list_.front())) {
      stats_->Add(Counter::dispatch_busy);
      break;
    }
    WriteToRing(dispatch_list_.front());
    dispatch_list_.pop_front();
  }
  if (staging_.empty()) return;
  // Busy: one request per dispatch, leaving the rest to merge; otherwise as
  // many as fit.
  size_t budget = busy_ewma_ != 0 ? 1 : staging_.size();
  bool refused = false;
  const uint64_t plug_ns = uint64_t{policy_.plug_us} * 1000;
  while (!staging_.empty() && budget > 0) {
    Pending& front = staging_.front();
    if (plug_ns != 0 && now_ns < front.staged_ns + plug_ns) break;  // plugged
    if (!CanWrite(front)) {
      refused = true;
      stats_->Add(Counter::dispatch_busy);
      break;
    }
    WriteToRing(front);
    staging_.pop_front();
    --budget;
  }
  // blk-mq's moving average: a refusal pulls it towards 16, a clean pass
  // towards 0; busy while it is not 0.
  busy_ewma_ = (busy_ewma_ * 7 + (refused ? 16 : 0)) / 8;
}

bool FrontendQueue::Pump(uint64_t now_ns) {
  if (ring_stopped_) return false;  // nothing goes to a ring not served
  while (!page_wait_.empty() && PrepareChildren(page_wait_.front(), now_ns)) {
    page_wait_.pop_front();
  }
  DispatchStaging(now_ns);
  return PublishLocked();
}

bool FrontendQueue::PublishLocked() {
  PushResult result = ring_->Publish();
  if (result == PushResult::kNothing) return false;
  uint64_t inflight = shadow_.size() - free_ids_.size();
  stats_->RaiseMax(Counter::inflight_max, inflight);
  if (result == PushResult::kNotify) {
    stats_->Add(Counter::kicks_sent);
    return true;
  }
  stats_->Add(Counter::kicks_suppressed);
  return false;
}

void FrontendQueue::Kick() {
  TraceInstant(trace_, TraceAction::kKick);
  if (KickHandler* handler = kick_handler_.load(std::memory_order_acquire)) {
    handler->HandleKick();
  } else {
    kick_->Signal();
  }
}

int64_t FrontendQueue::SleepBudgetNs(uint64_t now_ns) const {
  if (policy_.plug_us == 0 || staging_.empty()) return -1;
  uint64_t deadline =
      staging_.front().staged_ns + uint64_t{policy_.plug_us} * 1000;
  if (deadline > now_ns) return static_cast<int64_t>(deadline - now_ns);
  // The plug has expired and Pump() just ran: the front is held only because
  // the ring refused it or the busy score moved one request, so a request is
  // in flight and the Pump() that follows its response (on whichever thread
  // handles it) moves the front on. Waking now would only spin.
  return -1;
}

bool FrontendQueue::NeedsTimerWake(uint64_t now_ns) {
  if (policy_.plug_us == 0 || staging_.empty()) return false;
  uint64_t deadline =
      staging_.front().staged_ns + uint64_t{policy_.plug_us} * 1000;
  // An expired front waits for a response (see SleepBudgetNs); a deadline
  // the completion thread already sleeps towards needs nothing either.
  if (deadline <= now_ns || deadline >= timer_deadline_ns_) return false;
  timer_deadline_ns_ = deadline;
  return true;
}

void FrontendQueue::HandleInterrupt() {
  // Reused across calls on each thread: no allocation per interrupt.
  thread_local std::vector<BlockIo*> done;
  done.clear();
  ConsumeResponses(&done);
  Finish(done);
}

void FrontendQueue::CompletionLoop() {
  int64_t budget = -1;
  for (;;) {
    irq_->WaitFor(budget);
    HandleInterrupt();
    bool kick = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && outstanding_ == 0) return;
      if (policy_.plug_us > 0) {
        // Pump and the sleep decision see the same clock, so a plug that
        // expires between them cannot be slept through.
        uint64_t now = NowNs();
        kick = Pump(now);
        budget = SleepBudgetNs(now);
        timer_deadline_ns_ = budget < 0 ? UINT64_MAX : now + budget;
      }
    }
    if (kick) Kick();
  }
}

void FrontendQueue::ConsumeResponses(std::vector<BlockIo*>* done) {
  bool kick;
  bool wake_timer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (;;) {
      int consumed = ring_->ConsumeResponses(
          [&](uint64_t id, int result) { OnResponse(id, result, done); });
      if (consumed < 0) break;  // impossible index: nothing we can trust
      if (!ring_->FinalCheckForResponses()) break;
      stats_->Add(Counter::final_check_again);
    }
    uint64_t now = policy_.plug_us > 0 ? NowNs() : 0;
    kick = Pump(now);
    wake_timer = NeedsTimerWake(now);
  }
  if (kick) Kick();
  if (wake_timer) irq_->Signal();
}

void FrontendQueue::OnResponse(uint64_t id, int result,
                               std::vector<BlockIo*>* done) {
  // The backend is a stranger too: ignore ids we did not hand out.
  if (id >= shadow_.size() || !shadow_[id].in_use) return;
  Shadow& shadow = shadow_[id];
  // One failure fails every request the ring request carried; with one
  // member, its own error stands.
  int member_result = result < 0 && shadow.members.size() > 1 ? -EIO : result;
  if (trace_->on()) {
    TraceShadow(TraceAction::kComplete, static_cast<uint32_t>(id),
                result < 0 ? trace::kFailedFlag : 0);
  }
  for (const Member& member : shadow.members) {
    BlockIo* io = member.io;
    BlockIo::QueueState& state = io->state_;
    if (member_result < 0 && state.error == 0) state.error = member_result;
    // A write's pages are free as soon as the data is on the disk; a read's
    // hold the data until the BlockIo is completed.
    if (io->op == BlockOp::kWrite) {
      FreeRun(state.first_pages[member.child],
              PagesFor(ChildSectors(io, member.child)));
    }
    if (++state.answered == state.children) done->push_back(io);
  }
  shadow.members.clear();
  shadow.in_use = false;
  free_ids_.push_back(static_cast<uint32_t>(id));
  stats_->Sub(Counter::inflight);
  // Summing each request's time on the ring integrates inflight over time
  // (as the kernel's time_in_queue does), for iostat's aqu-sz.
  stats_->Add(Counter::inflight_ns, NowNs() - shadow.pushed_ns);
}

void FrontendQueue::OnRingStopped() {
  // What the backend answered before it stopped is real; the responses may
  // be unreadable too, and then every request on the ring fails.
  (void)Abandon();
}

void FrontendQueue::FailUnsent(std::vector<BlockIo*>* done) {
  auto fail = [&](const Member& member) {
    BlockIo* io = member.io;
    BlockIo::QueueState& state = io->state_;
    if (state.error == 0) state.error = -EIO;
    if (io->op == BlockOp::kWrite) {
      FreeRun(state.first_pages[member.child],
              PagesFor(ChildSectors(io, member.child)));
    }
    if (++state.answered == state.children) done->push_back(io);
  };
  for (Fifo<Pending>* list : {&staging_, &dispatch_list_}) {
    for (size_t i = 0; i < list->size(); ++i) {
      for (const Member& member : (*list)[i].members) fail(member);
    }
    list->clear();
  }
  // Children never prepared have no pages: they just count as answered.
  for (size_t i = 0; i < page_wait_.size(); ++i) {
    BlockIo* io = page_wait_[i];
    BlockIo::QueueState& state = io->state_;
    if (state.error == 0) state.error = -EIO;
    state.staged_data.reset();
    state.answered += state.children - state.prepared;
    if (state.answered == state.children) done->push_back(io);
  }
  page_wait_.clear();
}

void FrontendQueue::Finish(const std::vector<BlockIo*>& done) {
  if (done.empty()) return;
  // Inline for the common sizes: no allocation per batch of completions.
  absl::InlinedVector<DataPiece, 4> pieces;
  struct Run {
    uint32_t first_page;
    uint32_t pages;
  };
  absl::InlinedVector<Run, 32> runs_to_free;
  for (BlockIo* io : done) {
    BlockIo::QueueState& state = io->state_;
    pieces.clear();
    if (io->op == BlockOp::kRead) {
      // Only prepared children hold pages (all of them, unless the ring
      // stopped).
      for (uint32_t child = 0; child < state.prepared; ++child) {
        uint64_t count = ChildSectors(io, child);
        uint32_t first_page = state.first_pages[child];
        runs_to_free.push_back(Run{first_page, PagesFor(count)});
        if (state.error == 0) {
          pieces.push_back(
              DataPiece{PageAddress(first_page), count * kSectorSize});
        }
      }
    }
    // Complete() may delete the BlockIo: nothing of it is used after.
    io->Complete(state.error, pieces);
  }
  bool kick;
  bool wake_timer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Run& run : runs_to_free) FreeRun(run.first_page, run.pages);
    outstanding_ -= done.size();
    uint64_t now = policy_.plug_us > 0 ? NowNs() : 0;
    kick = Pump(now);
    wake_timer = NeedsTimerWake(now);
    if (outstanding_ == 0) drained_.notify_all();
  }
  if (kick) Kick();
  if (wake_timer) irq_->Signal();
}

bool FrontendQueue::Drain(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto drained = [this] { return outstanding_ == 0; };
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    drained_.wait(lock, drained);
    return true;
  }
  return drained_.wait_until(lock, deadline, drained);
}

FrontendQueue::Abandoned FrontendQueue::Abandon() {
  std::vector<BlockIo*> done;
  size_t answered = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ring_stopped_ = true;
    // Answers already published are real results; the rest fail.
    ring_->ConsumeResponses(
        [&](uint64_t id, int result) { OnResponse(id, result, &done); });
    answered = done.size();
    for (uint32_t id = 0; id < shadow_.size(); ++id) {
      if (shadow_[id].in_use) OnResponse(id, -EIO, &done);
    }
    FailUnsent(&done);
  }
  // Every BlockIo not completed is in `done` once (with its last child):
  // those after the real answers are what is given up on.
  Abandoned abandoned;
  for (size_t i = answered; i < done.size(); ++i) {
    ++abandoned.requests;
    if (IsData(done[i]->op)) {
      abandoned.bytes += done[i]->num_sectors * kSectorSize;
    }
  }
  // Complete() may delete each BlockIo: counted first.
  Finish(done);
  return abandoned;
}

void FrontendQueue::Stop() {
  if (!completion_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  irq_->Signal();
  completion_thread_.join();
}

}  // namespace pvdisk::transport
