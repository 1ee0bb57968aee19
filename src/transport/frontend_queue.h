// FrontendQueue: the driver side of one queue, independent of the ring
// protocol, with a software staging queue in front of the ring (blk-mq's
// software queue and dispatch, on a small scale).
//
// Submit() splits a BlockIo into children of at most max_segments pages, or
// a discard / write-zeroes range into pieces the protocol can carry
// (DriverRing::MaxRangeSectors; both counted as `splits`), gives each a run of
// pages from the pool, copies write data in, and stages each child as a pending
// ring request. Staging first tries to merge it into a staged request of the
// same direction: a back merge (it starts where that one ends), then a front
// merge, within max_segments pages, max_segments * 4 KiB and the iovecs an
// engine takes (io::kMaxIovecs, one per run of consecutive pages); flushes
// and discards never merge (`merges_read`, `merges_write`: one per request
// merged into another, as iostat counts).
//
// Dispatch policies (QueuePolicy::dispatch):
// - kWhenRoom: requests leave the staging queue only into free ring slots;
//   while the ring is full they stay where later ones can still merge into
//   them. A busy score (blk-mq's EWMA: busy = the ring refused) switches
//   between moving every request that fits (not busy) and one per dispatch
//   (busy).
// - kAlways: every request leaves staging at once for a dispatch list where
//   nothing merges, and waits there for ring room (blk-mq before 2017).
// `dispatch_busy` counts dispatch attempts the ring refused. With plug_us,
// staged requests are held up to that long even when the ring has room, so
// that a burst can merge (`plugs`).
//
// A ring request carries one or more children; its response completes each
// of them (any failure fails them all with EIO). HandleInterrupt() consumes
// responses and completes BlockIos: the backend calls it on its own thread
// (--irq inline), or a completion thread that sleeps on the interrupt eventfd
// does (--irq thread). The completion thread also flushes expired plugs.
//
// Threads: Submit() from any thread; it never waits for I/O. Completion
// callbacks run on the thread that handles the interrupt, outside the
// queue's lock, and must not call HandleInterrupt() themselves.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "base/fifo.h"
#include "stats/queue_stats.h"
#include "trace/event.h"
#include "trace/queue_trace.h"
#include "transport/block_io.h"
#include "transport/driver_ring.h"
#include "transport/event_fd.h"
#include "transport/interrupt_handler.h"
#include "transport/kick_handler.h"
#include "transport/lent_memory.h"
#include "transport/page_pool.h"

namespace pvdisk::transport {

// Where a queue's pages are, in data-page numbers (grant references).
struct FrontendLayout {
  uint32_t ring_slots = 0;
  uint32_t max_segments = 11;  // data pages per ring request
  uint32_t pool_pages = 0;     // pages 0 .. pool_pages - 1: the data pool
  // Pages reserved per ring request id for the protocol's tables (indirect
  // pages, headers), from page pool_pages on: id i owns
  // table_pages_per_request pages at pool_pages + i * table_pages_per_request.
  uint32_t table_pages_per_request = 0;
  // Memory the queue may grant directly (lent_memory.h), as pages
  // lent_first_page .. lent_first_page + lent.pages() - 1.
  LentMemory lent;
  uint32_t lent_first_page = 0;
};

enum class DispatchMode { kWhenRoom, kAlways };

// Says whether a write may not put `sector` (512 bytes) into sector 0.
using FirstSectorCheck = bool (*)(const uint8_t* sector);

struct QueuePolicy {
  bool merge = true;
  DispatchMode dispatch = DispatchMode::kWhenRoom;
  uint32_t plug_us = 0;  // 0: never hold requests back
  // When set, Submit() completes a write of sector 0 whose first sector
  // this refuses with -EPERM at once, before it reaches the ring (the ring
  // protocols carry no errno but EIO), and counts it in
  // `refused_header_writes`. A raw disk whose format was probed sets it
  // (image/image_headers.h); every write reaches sector 0 whole through
  // here, read-modify-writes too, so this is the one place it is checked.
  FirstSectorCheck refuse_first_sector = nullptr;
};

class FrontendQueue final : public InterruptHandler {
 public:
  // `data_memory` is the frontend's mapping of the data pages; `kick` wakes
  // the backend, `irq` is signalled by it. All pointers must outlive the
  // queue.
  FrontendQueue(std::unique_ptr<DriverRing> ring, uint8_t* data_memory,
                const FrontendLayout& layout, const QueuePolicy& policy,
                EventFd* kick, EventFd* irq, stats::QueueStats* stats);
  ~FrontendQueue() override;
  FrontendQueue(const FrontendQueue&) = delete;
  FrontendQueue& operator=(const FrontendQueue&) = delete;

  // Kicks go to `handler` instead of the kick eventfd (the inline
  // placement). Call before Start(); `handler` must outlive the queue.
  // May come after Start(), before any request is submitted.
  void SetKickHandler(KickHandler* handler) {
    kick_handler_.store(handler, std::memory_order_release);
  }

  // Requests' steps are recorded into `trace` (Q, M/F, G, I at staging, D
  // when written to the ring, C when answered, and kicks). Call before
  // Start(); `trace` must outlive the queue. Without it nothing is recorded.
  void SetTrace(trace::QueueTrace* trace) { trace_ = trace; }

  // Starts the completion thread.
  void Start();

  // Takes `io` into the queue's care until io->Complete() is called.
  // A BlockIo the pool can never hold (a read keeps all its pages until
  // answered; a write needs one child's pages at a time) completes at once
  // with -EINVAL; Queue sizes the pool for kMaxBlockIoSectors.
  // REQUIRES: io->num_sectors > 0 for reads and writes; Start() was called.
  void Submit(BlockIo* io);

  // Consumes responses and completes the BlockIos they finish; runs on the
  // completion thread, or on the backend thread with --irq inline.
  void HandleInterrupt() override;

  // The backend gave up on the ring: answers what it had published, fails
  // everything else in the queue and every later Submit() with EIO.
  void OnRingStopped() override;

  // The backend serving the ring died (a backend process, see
  // process/backend_supervisor.h). Consumes the responses it published,
  // replaces the ring with `fresh_ring()` (which initialises the shared ring
  // anew), writes every request still in flight into it again, with the
  // same id and the same data pages (still held: a write's data is as it
  // was), publishes them and kicks. The new backend starts at index 0 like
  // any backend of a new ring, so a request the dead one took but did not
  // answer is taken again (`reissued_reqs`). No-op once the ring stopped.
  // REQUIRES: no backend serves the ring while this runs.
  void Reconnect(absl::FunctionRef<std::unique_ptr<DriverRing>()> fresh_ring);

  // Blocks until every submitted BlockIo has completed, or until
  // `deadline`; returns whether everything completed.
  bool Drain(std::chrono::steady_clock::time_point deadline =
                 std::chrono::steady_clock::time_point::max());

  // What Abandon() gave up on: BlockIos, and the bytes of data the reads
  // and writes among them carried.
  struct Abandoned {
    uint64_t requests = 0;
    uint64_t bytes = 0;
  };
  // Shutdown gives up on a backend that does not answer: every BlockIo not
  // completed yet completes now with EIO, and so does every later Submit(),
  // as after OnRingStopped(). Responses that still come are ignored.
  // Contract: the pages of the abandoned requests go back to the pool's
  // bookkeeping only; the backend (or the kernel, for its io_uring) may
  // still read or write them, so the queue and its memory must never be
  // freed afterwards: the owner leaks them and the process exits.
  Abandoned Abandon();

  // Stops the completion thread. REQUIRES: Drain() returned true, or
  // Abandon() ran; no Submit() runs concurrently.
  void Stop();

 private:
  // One child of a BlockIo carried by a ring request.
  struct Member {
    BlockIo* io;
    uint32_t child;
  };
  using Members = absl::InlinedVector<Member, 4>;
  // A request's data pages: inline up to 32 KiB of one run, so that the
  // small requests that dominate a 4 KiB job allocate nothing.
  using Segments = absl::InlinedVector<DataSegment, 8>;
  // A ring request being formed: in the staging queue or the dispatch list.
  struct Pending {
    BlockOp op = BlockOp::kRead;
    uint64_t sector = 0;
    uint64_t num_sectors = 0;
    Segments segments;
    // How many iovecs the backend needs for `segments` at most: one per run
    // of whole consecutive pages. Merges keep it within io::kMaxIovecs.
    uint32_t iovecs = 0;
    Members members;
    uint64_t staged_ns = 0;  // when it entered the staging queue
  };
  // A ring request in flight, indexed by its id.
  // It keeps what was written to the ring, so that Reconnect() can write
  // it again.
  struct Shadow {
    BlockOp op = BlockOp::kRead;
    uint64_t sector = 0;
    uint64_t num_sectors = 0;
    Segments segments;
    Members members;
    bool in_use = false;
    uint64_t pushed_ns = 0;  // when it went onto the ring, for inflight_ns
  };

  void CompletionLoop();
  // Consumes all responses; returns the BlockIos that are now complete.
  void ConsumeResponses(std::vector<BlockIo*>* done);
  void OnResponse(uint64_t id, int result, std::vector<BlockIo*>* done);
  // Gives pages to the children of `io` and stages them. Returns false if the
  // pool ran out first. REQUIRES: mu_ held.
  bool PrepareChildren(BlockIo* io, uint64_t now_ns);
  // Puts a pending request into the staging queue, merging it if it can.
  void Stage(Pending pending);
  bool TryMerge(Pending& pending);
  // Moves work along: page waiters get pages, staged requests go to the
  // ring as the policy allows. Publishes; returns whether to kick.
  // REQUIRES: mu_ held.
  bool Pump(uint64_t now_ns);
  void DispatchStaging(uint64_t now_ns);
  bool CanWrite(const Pending& pending) const;
  void WriteToRing(Pending& pending);
  // Records `action` for each piece ring request `id` carries, the first
  // marked as the lead. REQUIRES: trace_->on().
  void TraceShadow(trace::TraceAction action, uint32_t id, uint8_t flags);
  // Writes in-flight request `id` (its shadow) into the ring.
  void WriteShadow(uint32_t id);
  // Copies the write data of io's unprepared children aside.
  void StageWriteData(BlockIo* io);
  // The caller's data of a read or write: where it may lie in lent memory.
  static const uint8_t* LentData(const BlockIo* io);
  // The frontend's address of data page `page` (pool, tables or lent).
  uint8_t* PageAddress(uint32_t page) const;
  // Returns a run to the pool; lent pages are the caller's and stay.
  void FreeRun(uint32_t first_page, uint32_t pages);
  // Publishes and counts the kick decision; returns whether to kick.
  bool PublishLocked();
  void Kick();
  // How long the completion thread may sleep before a plug expires, in ns;
  // -1 until it is signalled. REQUIRES: mu_ held, and Pump() just ran.
  int64_t SleepBudgetNs(uint64_t now_ns) const;
  // Whether the completion thread must be woken so that it flushes the
  // staging queue's front when its plug expires: true when that deadline is
  // still ahead and earlier than the one the thread sleeps towards (which it
  // then records). Every Pump() outside the completion loop asks this: with
  // --irq inline responses are handled on the backend thread, and nothing
  // else would re-arm the timer for requests staged meanwhile.
  // REQUIRES: mu_ held, and Pump() just ran.
  bool NeedsTimerWake(uint64_t now_ns);
  // Fails every request not on the ring (staged, dispatch list, waiting for
  // pages) with EIO; appends the BlockIos that are now complete.
  // REQUIRES: mu_ held.
  void FailUnsent(std::vector<BlockIo*>* done);
  // Calls Complete() on each of `done` and frees their read pages.
  void Finish(const std::vector<BlockIo*>& done);
  uint32_t PagesFor(uint64_t sectors) const {
    return static_cast<uint32_t>((sectors + kSectorsPerPage - 1) /
                                 kSectorsPerPage);
  }
  // The most sectors one child of a BlockIo of operation `op` carries.
  uint64_t SectorsPerChild(BlockOp op) const;
  // Sectors of child `child` of `io`.
  uint64_t ChildSectors(const BlockIo* io, uint32_t child) const;

  uint8_t* const data_;
  const FrontendLayout layout_;
  const QueuePolicy policy_;
  const uint32_t sectors_per_request_;
  // The ring protocol's range limits (DriverRing::MaxRangeSectors).
  const uint64_t max_discard_sectors_;
  const uint64_t max_write_zeroes_sectors_;
  EventFd* const kick_;
  std::atomic<KickHandler*> kick_handler_{nullptr};  // when set, kicks go here
  EventFd* const irq_;
  stats::QueueStats* const stats_;
  trace::QueueTrace* trace_ = trace::QueueTrace::Off();

  std::mutex mu_;
  std::condition_variable drained_;
  // All below guarded by mu_.
  std::unique_ptr<DriverRing> ring_;
  PagePool pool_;
  std::vector<Shadow> shadow_;
  std::vector<uint32_t> free_ids_;
  Fifo<BlockIo*> page_wait_;           // BlockIos waiting for pages
  Fifo<Pending> staging_;              // mergeable
  Fifo<Pending> dispatch_list_;        // kAlways: waiting for the ring
  uint32_t busy_ewma_ = 0;             // blk-mq's dispatch_busy
  std::vector<uint32_t> table_pages_;  // scratch for one ring request
  uint64_t outstanding_ = 0;           // submitted BlockIos not yet completed
  // The plug deadline the completion thread sleeps towards, in NowNs() time;
  // UINT64_MAX while it sleeps until signalled.
  uint64_t timer_deadline_ns_ = UINT64_MAX;
  bool stopping_ = false;
  bool ring_stopped_ = false;  // OnRingStopped() was called

  std::thread completion_thread_;
};

}  // namespace pvdisk::transport
