#include "transport/frontend_queue.h"

#include <cerrno>
#include <cstring>

#include "base/thread.h"
#include "transport/blkif_format.h"

namespace pvdisk::transport {

using stats::Counter;

FrontendQueue::FrontendQueue(std::unique_ptr<DriverRing> ring,
                             uint8_t* data_memory, ChunkPool pool,
                             uint32_t ring_slots, EventFd* kick, EventFd* irq,
                             stats::QueueStats* stats)
    : data_(data_memory),
      sectors_per_chunk_(pool.pages_per_chunk() * blkif::kSectorsPerPage),
      kick_(kick),
      irq_(irq),
      stats_(stats),
      ring_(std::move(ring)),
      pool_(std::move(pool)),
      shadow_(ring_slots) {
  free_ids_.reserve(ring_slots);
  for (uint32_t id = ring_slots; id > 0; --id) free_ids_.push_back(id - 1);
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
      is_data
          ? static_cast<uint32_t>((io->num_sectors + sectors_per_chunk_ - 1) /
                                  sectors_per_chunk_)
          : 1;
  if (io->op == BlockOp::kRead) {
    if (state.children > pool_.chunk_count()) {
      io->Complete(-EINVAL, {});
      return;
    }
    state.chunks.resize(state.children);
  }
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
  uint64_t from = uint64_t{state.dispatched} * sectors_per_chunk_;
  size_t bytes = (io->num_sectors - from) * kSectorSize;
  state.staged_data = std::make_unique<uint8_t[]>(bytes);
  std::memcpy(state.staged_data.get(), io->write_data + from * kSectorSize,
              bytes);
  state.staged_from_sector = from;
}

bool FrontendQueue::DispatchChildren(BlockIo* io) {
  BlockIo::QueueState& state = io->state_;
  bool is_data = io->op == BlockOp::kRead || io->op == BlockOp::kWrite;
  DataSegment segments[blkif::kMaxDirectSegments];
  while (state.dispatched < state.children) {
    if (ring_->FreeSlots() == 0 || free_ids_.empty()) return false;
    RingRequest request;
    request.op = io->op;
    Shadow shadow;
    shadow.io = io;
    if (is_data) {
      std::optional<uint32_t> chunk = pool_.Allocate();
      if (!chunk) return false;
      uint64_t first = uint64_t{state.dispatched} * sectors_per_chunk_;
      uint64_t count =
          std::min<uint64_t>(sectors_per_chunk_, io->num_sectors - first);
      uint32_t page = pool_.FirstPage(*chunk);
      uint8_t* memory = data_ + size_t{page} * blkif::kPageSize;
      if (io->op == BlockOp::kWrite) {
        const uint8_t* source =
            state.staged_data
                ? state.staged_data.get() +
                      (first - state.staged_from_sector) * kSectorSize
                : io->write_data + first * kSectorSize;
        std::memcpy(memory, source, count * kSectorSize);
      } else {
        state.chunks[state.dispatched] = *chunk;
      }
      // Whole pages from the start of the chunk; the last may be partial.
      uint32_t segment_count = 0;
      for (uint64_t done = 0; done < count; done += blkif::kSectorsPerPage) {
        uint64_t in_page =
            std::min<uint64_t>(blkif::kSectorsPerPage, count - done);
        segments[segment_count] = DataSegment{
            page + segment_count, 0, static_cast<uint8_t>(in_page - 1)};
        ++segment_count;
      }
      request.sector = io->sector + first;
      request.num_sectors = count;
      request.segments = segments;
      request.segment_count = segment_count;
      shadow.chunk = *chunk;
      shadow.has_chunk = io->op == BlockOp::kWrite;
    } else {
      request.sector = io->sector;
      request.num_sectors = io->num_sectors;
    }
    uint32_t id = free_ids_.back();
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
  if (shadow.has_chunk) pool_.Free(shadow.chunk);
  BlockIo::QueueState& state = shadow.io->state_;
  if (result < 0 && state.error == 0) state.error = result;
  if (++state.answered == state.children) done->push_back(shadow.io);
}

void FrontendQueue::Finish(const std::vector<BlockIo*>& done) {
  if (done.empty()) return;
  std::vector<DataPiece> pieces;
  std::vector<uint32_t> chunks_to_free;
  for (BlockIo* io : done) {
    BlockIo::QueueState& state = io->state_;
    // Move what we still need out of the BlockIo: Complete() may delete it.
    std::vector<uint32_t> chunks = std::move(state.chunks);
    int result = state.error;
    pieces.clear();
    if (io->op == BlockOp::kRead && result == 0) {
      uint64_t remaining = io->num_sectors;
      for (uint32_t chunk : chunks) {
        uint64_t count = std::min<uint64_t>(sectors_per_chunk_, remaining);
        remaining -= count;
        pieces.push_back(
            DataPiece{data_ + size_t{pool_.FirstPage(chunk)} * blkif::kPageSize,
                      count * kSectorSize});
      }
    }
    io->Complete(result, pieces);
    chunks_to_free.insert(chunks_to_free.end(), chunks.begin(), chunks.end());
  }
  bool kick;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t chunk : chunks_to_free) pool_.Free(chunk);
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
