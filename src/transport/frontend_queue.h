// FrontendQueue: the driver side of one queue, independent of the ring
// protocol. FUSE threads Submit() BlockIos; the queue splits each into ring
// requests of at most max_segments pages (counted in `splits`), copies write
// data into pages from its pool, puts the requests on the ring and kicks the
// backend when the protocol says so. While the ring or the page pool is full,
// BlockIos wait in a FIFO staging queue (counted as ring_full) and are
// dispatched as responses free room. A completion thread (the "interrupt
// handler") sleeps on the interrupt eventfd, consumes responses and
// completes BlockIos.
//
// Threads: Submit() from any thread; it never waits for I/O. Completion
// callbacks run on the completion thread, outside the queue's lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "stats/queue_stats.h"
#include "transport/block_io.h"
#include "transport/driver_ring.h"
#include "transport/event_fd.h"
#include "transport/page_pool.h"

namespace pvdisk::transport {

// Where a queue's pages are, in data-page numbers (grant references).
struct FrontendLayout {
  uint32_t ring_slots = 0;
  uint32_t max_segments = 11;  // data pages per ring request
  uint32_t pool_pages = 0;     // pages 0 .. pool_pages - 1: the data pool
  // Pages reserved per ring request id for segment tables (indirect pages),
  // from page pool_pages on: id i owns table_pages_per_request pages at
  // pool_pages + i * table_pages_per_request. 0 if never needed.
  uint32_t table_pages_per_request = 0;
};

class FrontendQueue {
 public:
  // `data_memory` is the frontend's mapping of the data pages; `kick` wakes
  // the backend, `irq` is signalled by it. All pointers must outlive the
  // queue.
  FrontendQueue(std::unique_ptr<DriverRing> ring, uint8_t* data_memory,
                const FrontendLayout& layout, EventFd* kick, EventFd* irq,
                stats::QueueStats* stats);
  ~FrontendQueue();
  FrontendQueue(const FrontendQueue&) = delete;
  FrontendQueue& operator=(const FrontendQueue&) = delete;

  // Starts the completion thread.
  void Start();

  // Takes `io` into the queue's care until io->Complete() is called.
  // A BlockIo the pool can never hold (a read keeps all its pages until
  // answered; a write needs one ring request's pages at a time) completes at
  // once with -EINVAL; Queue sizes the pool for kMaxBlockIoSectors.
  // REQUIRES: io->num_sectors > 0 for reads and writes; Start() was called.
  void Submit(BlockIo* io);

  // Blocks until every submitted BlockIo has completed.
  void Drain();

  // Stops the completion thread. REQUIRES: Drain() returned and no Submit()
  // runs concurrently.
  void Stop();

 private:
  // A ring request in flight, indexed by its id.
  struct Shadow {
    BlockIo* io = nullptr;
    uint32_t first_page = 0;
    uint32_t pages = 0;
    bool free_pages_on_response = false;  // writes: pages free at once
  };

  void CompletionLoop();
  // Consumes all responses; returns the BlockIos that are now complete.
  void ConsumeResponses(std::vector<BlockIo*>* done);
  void OnResponse(uint64_t id, int result, std::vector<BlockIo*>* done);
  // Puts staged BlockIos on the ring while there is room; publishes and
  // returns whether to kick. REQUIRES: mu_ held.
  bool DispatchStaged();
  // Puts the remaining children of `io` on the ring. Returns false if the
  // ring or the pool ran out of room first. REQUIRES: mu_ held.
  bool DispatchChildren(BlockIo* io);
  // Copies the write data of io's undispatched children aside.
  void StageWriteData(BlockIo* io);
  // Publishes and counts the kick decision; returns whether to kick.
  bool PublishLocked();
  void Kick();
  // Calls Complete() on each of `done` and frees their read pages.
  void Finish(const std::vector<BlockIo*>& done);
  uint32_t PagesFor(uint64_t sectors) const {
    return static_cast<uint32_t>((sectors + 7) / 8);
  }

  uint8_t* const data_;
  const FrontendLayout layout_;
  const uint32_t sectors_per_request_;
  EventFd* const kick_;
  EventFd* const irq_;
  stats::QueueStats* const stats_;

  std::mutex mu_;
  std::condition_variable drained_;
  // All below guarded by mu_.
  std::unique_ptr<DriverRing> ring_;
  PagePool pool_;
  std::vector<Shadow> shadow_;
  std::vector<uint32_t> free_ids_;
  std::deque<BlockIo*> staging_;
  std::vector<DataSegment> segments_;   // scratch for one ring request
  std::vector<uint32_t> table_pages_;   // scratch for one ring request
  uint64_t outstanding_ = 0;  // submitted BlockIos not yet completed
  bool stopping_ = false;

  std::thread completion_thread_;
};

}  // namespace pvdisk::transport
