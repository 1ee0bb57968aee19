#include "transport/frontend_queue.h"

#include <cerrno>
#include <cstring>

#include "base/thread.h"

namespace pvdisk::transport {

using stats::Counter;

FrontendQueue::FrontendQueue(std::unique_ptr<DriverRing> ring,
                             uint8_t* data_memory,
                             const FrontendLayout& layout, EventFd* kick,
                             EventFd* irq, stats::QueueStats* stats)
    : data_(data_memory),
      layout_(layout),
      sectors_per_request_(layout.max_segments * kSectorsPerPage),
      kick_(kick),
      irq_(irq),
      stats_(stats),
      ring_(std::move(ring)),
      pool_(layout.pool_pages),
      shadow_(layout.ring_slots) {
  free_ids_.reserve(layout.ring_slots);
  for (uint32_t id = layout.ring_slots; id > 0; --id) free_ids_.push_back(id - 1);
  segments_.reserve(layout.max_segments);
  table_pages_.reserve(layout.table_pages_per_request);
}

FrontendQueue::~FrontendQueue() { Stop(); }

void FrontendQueue::Start() {
  completion_thread_ = StartThreadWithoutSignals([this] { CompletionLoop(); });
}

void FrontendQueue::Submit(BlockIo* io) {
  BlockIo::QueueState& state = io->state_;
  state = BlockIo::QueueState{};
  bool is_data = io->op == BlockOp::kRead || io->op == BlockOp::kWrite;
  state.children =
      is_data ? static_cast<uint32_t>(
                    (io->num_sectors + sectors_per_request_ - 1) /
                    sectors_per_request_)
              : 1;
  if (is_data) {
    // A BlockIo the pool can never hold would wait forever: each child's
    // run (rounded up to a power of two) must fit, and a read keeps all its
    // runs until it is answered. pool_.pages() never changes, so reading it
    // unlocked is safe.
    uint64_t run = PagePool::RunPages(PagesFor(
        std::min<uint64_t>(io->num_sectors, sectors_per_request_)));
    uint64_t held_at_once = io->op == BlockOp::kRead ? state.children : 1;
    if (run * held_at_once > pool_.pages()) {
      io->Complete(-EINVAL, {});
      return;
    }
  }
  if (io->op == BlockOp::kRead) state.first_pages.resize(state.children);
  if (state.children > 1) stats_->Add(Counter::splits, state.children - 1);

  bool kick;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++outstanding_;
    // FIFO: a new BlockIo may not overtake staged ones.
    if (!staging_.empty() || !DispatchChildren(io)) {
      stats_->Add(Counter::ring_full);
      StageWriteData(io);
      staging_.push_back(io);
    }
    kick = PublishLocked();
  }
  if (kick) Kick();
}

void FrontendQueue::StageWriteData(BlockIo* io) {
  BlockIo::QueueState& state = io->state_;
  if (io->op != BlockOp::kWrite || state.staged_data) return;
  uint64_t from = uint64_t{state.dispatched} * sectors_per_request_;
  size_t bytes = (io->num_sectors - from) * kSectorSize;
  state.staged_data = std::make_unique<uint8_t[]>(bytes);
  std::memcpy(state.staged_data.get(), io->write_data + from * kSectorSize,
              bytes);
  state.staged_from_sector = from;
}

bool FrontendQueue::DispatchChildren(BlockIo* io) {
  BlockIo::QueueState& state = io->state_;
  bool is_data = io->op == BlockOp::kRead || io->op == BlockOp::kWrite;
  while (state.dispatched < state.children) {
    uint64_t first = uint64_t{state.dispatched} * sectors_per_request_;
    uint64_t count =
        is_data ? std::min<uint64_t>(sectors_per_request_,
                                     io->num_sectors - first)
                : 0;
    uint32_t pages = PagesFor(count);
    if (free_ids_.empty() || !ring_->HasRoomFor(io->op, pages)) return false;
    RingRequest request;
    request.op = io->op;
    Shadow shadow;
    shadow.io = io;
    uint32_t id = free_ids_.back();
    if (is_data) {
      std::optional<uint32_t> first_page = pool_.Allocate(pages);
      if (!first_page) return false;
      uint8_t* memory = data_ + size_t{*first_page} * kPageSize;
      if (io->op == BlockOp::kWrite) {
        const uint8_t* source =
            state.staged_data
                ? state.staged_data.get() +
                      (first - state.staged_from_sector) * kSectorSize
                : io->write_data + first * kSectorSize;
        std::memcpy(memory, source, count * kSectorSize);
      } else {
        state.first_pages[state.dispatched] = *first_page;
      }
      // Whole pages from the start of the run; the last may be partial.
      segments_.clear();
      for (uint64_t done = 0; done < count; done += kSectorsPerPage) {
        uint64_t in_page =
            std::min<uint64_t>(kSectorsPerPage, count - done);
        segments_.push_back(
            DataSegment{*first_page + static_cast<uint32_t>(segments_.size()),
                        0, static_cast<uint8_t>(in_page - 1)});
      }
      request.sector = io->sector + first;
      request.num_sectors = count;
      request.segments = segments_.data();
      request.segment_count = static_cast<uint32_t>(segments_.size());
      shadow.first_page = *first_page;
      shadow.pages = pages;
      shadow.free_pages_on_response = io->op == BlockOp::kWrite;
    } else {
      request.sector = io->sector;
      request.num_sectors = io->num_sectors;
    }
    // This id's table pages, for a protocol that needs them (indirect
    // segment pages, descriptor tables, headers).
    table_pages_.clear();
    for (uint32_t t = 0; t < layout_.table_pages_per_request; ++t) {
      table_pages_.push_back(layout_.pool_pages +
                             id * layout_.table_pages_per_request + t);
    }
    request.table_pages = table_pages_.data();
    request.table_page_count = layout_.table_pages_per_request;
    free_ids_.pop_back();
    shadow_[id] = shadow;
    request.id = id;
    ring_->Write(request);
    ++state.dispatched;
    stats_->Add(Counter::inflight);
  }
  // Fully on the ring: the staging copy is no longer needed.
  state.staged_data.reset();
  return true;
}

bool FrontendQueue::DispatchStaged() {
  while (!staging_.empty()) {
    if (!DispatchChildren(staging_.front())) break;
    staging_.pop_front();
  }
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

void FrontendQueue::Kick() { kick_->Signal(); }

void FrontendQueue::CompletionLoop() {
  std::vector<BlockIo*> done;
  for (;;) {
    irq_->Wait();
    done.clear();
    ConsumeResponses(&done);
    Finish(done);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && outstanding_ == 0) return;
  }
}

void FrontendQueue::ConsumeResponses(std::vector<BlockIo*>* done) {
  bool kick;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (;;) {
      int consumed = ring_->ConsumeResponses(
          [&](uint64_t id, int result) { OnResponse(id, result, done); });
      if (consumed < 0) break;  // impossible index: nothing we can trust
      if (!ring_->FinalCheckForResponses()) break;
      stats_->Add(Counter::final_check_again);
    }
    kick = DispatchStaged();
  }
  if (kick) Kick();
}

void FrontendQueue::OnResponse(uint64_t id, int result,
                               std::vector<BlockIo*>* done) {
  // The backend is a stranger too: ignore ids we did not hand out.
  if (id >= shadow_.size() || shadow_[id].io == nullptr) return;
  Shadow shadow = shadow_[id];
  shadow_[id] = Shadow{};
  free_ids_.push_back(static_cast<uint32_t>(id));
  stats_->Sub(Counter::inflight);
  if (shadow.free_pages_on_response) pool_.Free(shadow.first_page, shadow.pages);
  BlockIo::QueueState& state = shadow.io->state_;
  if (result < 0 && state.error == 0) state.error = result;
  if (++state.answered == state.children) done->push_back(shadow.io);
}

void FrontendQueue::Finish(const std::vector<BlockIo*>& done) {
  if (done.empty()) return;
  std::vector<DataPiece> pieces;
  struct Run {
    uint32_t first_page;
    uint32_t pages;
  };
  std::vector<Run> runs_to_free;
  for (BlockIo* io : done) {
    BlockIo::QueueState& state = io->state_;
    // Take what we still need out of the BlockIo: Complete() may delete it.
    std::vector<uint32_t> first_pages = std::move(state.first_pages);
    int result = state.error;
    uint64_t remaining = io->num_sectors;
    pieces.clear();
    for (uint32_t first_page : first_pages) {
      uint64_t count = std::min<uint64_t>(sectors_per_request_, remaining);
      remaining -= count;
      runs_to_free.push_back(Run{first_page, PagesFor(count)});
      if (result == 0) {
        pieces.push_back(DataPiece{
            data_ + size_t{first_page} * kPageSize, count * kSectorSize});
      }
    }
    io->Complete(result, pieces);
  }
  bool kick;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Run& run : runs_to_free) pool_.Free(run.first_page, run.pages);
    outstanding_ -= done.size();
    kick = DispatchStaged();
    if (outstanding_ == 0) drained_.notify_all();
  }
  if (kick) Kick();
}

void FrontendQueue::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [this] { return outstanding_ == 0; });
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
