// UringQueue: one FUSE uring queue as the protocol has it (reference/fuse.md
// §3), on the io_uring of the thread that owns it: the ring (128-byte SQEs,
// /dev/fuse registered as its one file), the entries' header and payload
// buffers, their REGISTER and COMMIT_AND_FETCH commands, the eventfd other
// threads wake the owner with, and the lending of the ring to a companion's
// engines (io::RingLender). What to commit when, and on which thread, is
// not decided here (commit_router.h); the loop that runs it is the
// channel's (uring_channel.h).
//
// Every call but Wake() is made on the owner thread; QueueCommand on the
// thread whose ring takes the command, which may hold another queue's entry.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "fuse/channel/fixed_buffer_table.h"
#include "fuse/channel/payload_arena.h"
#include "fuse/channel/queue_commits.h"
#include "fuse/channel/uring_entry.h"
#include "fuse/protocol/request.h"
#include "io/ring_lender.h"

namespace pvdisk::fuse::channel {

class UringQueue final : public io::RingLender {
 public:
  explicit UringQueue(uint32_t qid) : qid_(qid) {}
  ~UringQueue() override;
  UringQueue(const UringQueue&) = delete;
  UringQueue& operator=(const UringQueue&) = delete;

  // Makes the ring (room for every entry's command, the wake read and
  // `extra_sq_entries` more per round), registers `fuse_fd`, and maps
  // `depth` entries with `payload_bytes` each (in `arena` when given: it
  // must hold this queue at this depth and size).
  absl::Status SetUp(int fuse_fd, uint32_t depth, uint32_t payload_bytes,
                     const PayloadArena* arena, uint32_t extra_sq_entries);

  uint32_t qid() const { return qid_; }
  io_uring* uring() { return &uring_; }
  UringEntry& entry(uint32_t index) { return entries_[index]; }
  uint32_t depth() const { return static_cast<uint32_t>(entries_.size()); }
  uint32_t payload_bytes() const { return payload_bytes_; }

  // Queues, on this ring, the next command (`cmd`: REGISTER or
  // COMMIT_AND_FETCH) of entry `index` of `owner` (this queue or another),
  // and makes this queue's thread its holder. No room: the entry is dead.
  void QueueCommand(UringQueue& owner, uint32_t index, uint32_t cmd);
  // Registers every entry, in index order: the kernel hands out the entry
  // registered last first, and afterwards the one committed last, so a
  // queue that holds n requests at once uses its top n entries, which the
  // payload arena puts in huge pages (payload_arena.h).
  void RegisterEntries();

  // The request the kernel wrote into entry `index` (a COMMIT_AND_FETCH or
  // REGISTER that completed with 0); records its commit id.
  protocol::RawRequest TakeRequest(uint32_t index);
  // Writes a reply into entry `index`'s buffers (the entry is the
  // replier's until committed). Returns the payload bytes it carries; a
  // reply larger than the entry's payload becomes EIO with none.
  size_t WriteReply(uint32_t index, uint64_t unique, int error,
                    std::span<const iovec> payload);

  // Queues the read of the wake eventfd (its CQE carries kWakeTag).
  void ArmWake();
  // Any thread: wakes the owner's ring, unless a wake is pending already.
  void Wake();
  // The owner took the wake: the next Wake() writes the eventfd again.
  void WakeTaken() { wake_pending_.store(false, std::memory_order_release); }
  bool can_wake() const { return wake_fd_ >= 0; }

  // Spins up to `us` microseconds, without waiting in the kernel, until a
  // completion is posted or pending. True if one came; false at the
  // deadline or when `stop` is set.
  bool SpinForCompletion(uint32_t us, const std::atomic<bool>& stop);

  // Hands a lent CQE to its sink; false if `tag` is not a lent one.
  bool RouteToSink(uint64_t tag, int32_t res);

  // io::RingLender, for the companion's engines.
  io_uring* ring() override { return &uring_; }
  uint64_t Lend(io::CqeSink* sink) override;
  void Unlend(uint64_t tag) override;
  int AddFixedBuffers(const std::vector<iovec>& buffers) override;
  // Each round: FixedBufferTable::DropUnpinnable.
  void DropUnpinnable() {
    if (fixed_buffers_) fixed_buffers_->DropUnpinnable();
  }
  int FixedBufferFor(const void* data, size_t length) override;
  int AddFixedFiles(const std::vector<int>& fds) override;
  void RemoveFixedFiles(int base, size_t count) override;
  // A completion posted, or pending (COOP_TASKRUN with TASKRUN_FLAG: the
  // next io_uring_enter posts it).
  bool HasWaitingCompletions() override;
  // Whether an io_uring_enter would do anything now: submissions queued, a
  // completion waiting to be posted (IORING_SQ_TASKRUN) or a CQ overflow to
  // flush. When not, every completion that has come is already in the CQ.
  bool NeedsEnter();
  uint32_t BorrowedInFlight() override;
  // The entries `commits` holds with the handler (set by the channel: the
  // owner thread's QueueCommits); none until then.
  uint32_t RequestsOpen() override {
    return commits_ != nullptr ? commits_->with_handler() : 0;
  }
  void CountRequestsOf(const QueueCommits* commits) { commits_ = commits; }

 private:
  // The ring's file table: /dev/fuse, then the borrowing engines' image
  // files (each disk's, once: a backing chain's layers count one each).
  static constexpr unsigned kFixedFileSlots = 64;

  io_uring_sqe* GetSqe();

  const uint32_t qid_;
  io_uring uring_;
  bool ring_ready_ = false;
  int wake_fd_ = -1;
  uint64_t wake_value_ = 0;
  std::atomic<bool> wake_pending_{false};
  void* header_memory_ = nullptr;
  size_t header_bytes_ = 0;
  void* payload_memory_ = nullptr;
  size_t payload_memory_bytes_ = 0;
  bool payload_owned_ = false;  // mapped here (else the arena's)
  uint32_t payload_bytes_ = 0;  // per entry
  std::vector<UringEntry> entries_;
  std::unique_ptr<FixedBufferTable> fixed_buffers_;  // made with the ring
  std::vector<io::CqeSink*> sinks_;        // lent tag >> kSinkBits, minus one
  const QueueCommits* commits_ = nullptr;  // for RequestsOpen()
  // The descriptor in each used slot; -1 for one emptied by
  // RemoveFixedFiles.
  std::vector<int> fixed_files_;
};

}  // namespace pvdisk::fuse::channel
