// BlockIo: one block request as the FUSE layer hands it to a queue, whatever
// the ring protocol. The queue may split it into several ring requests; it
// completes it exactly once, with one result, after all of them are answered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace pvdisk::transport {

enum class BlockOp : uint8_t {
  kRead,
  kWrite,
  kFlush,
  kDiscard,      // deallocate; the range reads as zeros afterwards
  kWriteZeroes,  // the range reads as zeros afterwards; stays allocated
};

inline constexpr uint32_t kSectorSize = 512;
inline constexpr uint32_t kPageSize = 4096;
inline constexpr uint32_t kSectorsPerPage = kPageSize / kSectorSize;

// Read data handed to BlockIo::Complete, in disk order.
struct DataPiece {
  const uint8_t* data;
  size_t length;
};

class BlockIo {
 public:
  // What to do. For kRead/kWrite num_sectors > 0.
  BlockOp op = BlockOp::kRead;
  uint64_t sector = 0;
  uint64_t num_sectors = 0;
  // kWrite: num_sectors * 512 bytes. Only needs to stay valid until
  // FrontendQueue::Submit() returns: the queue copies it into data pages (or,
  // while the ring is full, into a staging copy) before returning. Unless
  // the queue's lent memory holds it (transport/lent_memory.h): then the
  // ring request carries those pages as they are, and they must stay valid
  // and unchanged until Complete() returns.
  const uint8_t* write_data = nullptr;
  // kRead: where the caller would like the num_sectors * 512 bytes, or null.
  // If the queue's lent memory holds that range, the backend reads straight
  // into it (Complete's pieces then point there; it must stay valid until
  // Complete() returns); otherwise the data arrives in data pages.
  uint8_t* read_into = nullptr;

  // Called exactly once, from the queue's completion thread, when every ring
  // request of this BlockIo has been answered. `result` is 0 or a negative
  // errno (-EIO if any part failed). For a successful kRead, `data` holds the
  // num_sectors * 512 bytes read; the memory is the queue's data pages and is
  // valid only during the call. The queue does not touch the BlockIo after
  // calling Complete(), which may delete it or submit new BlockIos.
  virtual void Complete(int result, absl::Span<const DataPiece> data) = 0;

 protected:
  ~BlockIo() = default;

 private:
  friend class FrontendQueue;
  // Bookkeeping owned by the queue while the BlockIo is in its care.
  struct QueueState {
    // As new, keeping first_pages' storage. (Not `= QueueState{}`: GCC 12
    // takes the temporary's inlined vector for uninitialized.)
    void Reset() {
      children = prepared = dispatched = answered = 0;
      error = 0;
      lent = false;
      first_pages.clear();
      staged_data.reset();
      staged_from_sector = 0;
    }

    uint32_t children = 0;    // pieces of at most max_segments pages
    uint32_t prepared = 0;    // of those, given pages and staged so far
    uint32_t dispatched = 0;  // of those, put on the ring so far
    uint32_t answered = 0;    // of those, answered so far
    int error = 0;            // first failure, as a negative errno
    bool lent = false;        // the data is on lent pages: none of the pool
    // kRead/kWrite: the first data page of each prepared child (a child's
    // pages are one contiguous run). Inline for the common few children: no
    // allocation per request.
    absl::InlinedVector<uint32_t, 4> first_pages;
    // kWrite data of children not yet prepared, copied while the page pool
    // was exhausted.
    std::unique_ptr<uint8_t[]> staged_data;
    uint64_t staged_from_sector = 0;
  };
  QueueState state_;
};

}  // namespace pvdisk::transport
