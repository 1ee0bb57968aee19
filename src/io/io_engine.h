// The I/O engine interface: what the backend uses to read and write the image.
//
// One engine instance belongs to one backend thread and is never shared:
// Queue(), WatchWakeFd() and Run() are all called from that thread. Results on
// the hot path are plain ints (bytes or negative errno); absl::Status is used
// only where an engine is created or configured.
#pragma once

#include <sys/uio.h>

#include <climits>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace pvdisk::io {

enum class IoOp : uint8_t {
  kRead,
  kWrite,
  kFlush,        // fdatasync of the image
  kDiscard,      // punch a hole: reads of the range return zeros afterwards
  kWriteZeroes,  // the range reads as zeros afterwards; space stays allocated
};

// The most iovecs one kRead/kWrite may carry: what preadv(2) and io_uring's
// READV/WRITEV take. Engines refuse more with -EINVAL, so callers must keep
// requests within it.
inline constexpr int kMaxIovecs = IOV_MAX;

struct IoRequest {
  IoOp op = IoOp::kRead;
  // Which of the engine's files (the list it was made over, top first; see
  // engine_factory.h) the request is for. Engines refuse an index beyond
  // their list with -EINVAL; the uring engine names the file by its
  // fixed-file slot. It sits in the padding after `op`: a request stays the
  // size it was (checked below).
  uint16_t file = 0;
  uint64_t offset = 0;  // bytes into the image; kFlush ignores it
  uint64_t length = 0;  // bytes; for kRead/kWrite the sum of the iov lengths
  // kRead/kWrite: the buffers. The array and the memory it points to must stay
  // valid until the request's completion has been returned by Run().
  const iovec* iov = nullptr;
  int iov_count = 0;
  uint64_t tag = 0;  // returned unchanged in the completion
  // kRead/kWrite with iov_count == 1: the index of a buffer registered with
  // RegisterBuffers() that contains iov[0], or -1. Engines that can use it
  // (uring: READ_FIXED / WRITE_FIXED) save pinning the pages per request.
  int buffer_index = -1;
};
// Seven words: the file index lives in the padding after `op`.
static_assert(sizeof(IoRequest) == 7 * sizeof(uint64_t),
              "IoRequest must stay seven words");

struct IoCompletion {
  uint64_t tag = 0;
  // I/O: `length` of the request on success (engines finish short transfers
  // themselves), or a negative errno. Wake-up: 0.
  int64_t result = 0;
  // True when this reports that a watched eventfd was signalled (its counter
  // has already been read and cleared), not an I/O.
  bool wake = false;
};

// What a format layer's engine (a qcow2 engine) did with its metadata:
// the per-queue counters of the same names (stats/counters.h).
struct FormatCounts {
  uint64_t l2_hits = 0;             // L2 entries found in the cache
  uint64_t l2_misses = 0;           // L2 tables read because they were not
  uint64_t meta_reads = 0;          // metadata reads (tables) from the files
  uint64_t meta_writes = 0;         // metadata writes to the files
  uint64_t clusters_allocated = 0;  // data clusters allocated
  uint64_t cow_bytes = 0;           // bytes copied into new clusters
  uint64_t compressed_reads = 0;    // compressed clusters inflated by reads
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;

  // "uring", "sync" or "null": what the stats header shows.
  virtual std::string_view name() const = 0;

  // A one-line note for the stats header, e.g. "O_DIRECT" or "buffered
  // (O_DIRECT refused by the image's filesystem)". May be empty.
  virtual std::string_view mode() const = 0;

  // Accepts one request. Hot path. Returns 0 when a completion will follow in
  // a later Run(), or a negative errno when the request was refused (and no
  // completion will follow). REQUIRES: inflight() < the depth given at
  // creation (EngineOptions::depth). An engine's own capacity is that depth
  // plus EngineOptions::extra_ios: the room a layer above it (a format, a
  // fan-out decorator) has for the I/Os it issues beyond its callers'
  // requests; beyond depth + extra_ios an engine refuses with -EBUSY.
  virtual int Queue(const IoRequest& request) = 0;

  // Makes Run(wait=true) return when the eventfd `fd` is signalled: the engine
  // reads the counter and reports IoCompletion{tag, 0, wake=true}. The watch
  // stays armed for the engine's lifetime. `fd` must outlive the engine.
  virtual absl::Status WatchWakeFd(int fd, uint64_t tag) = 0;

  // Submits everything queued, then appends every available completion to
  // `out`. With `wait`, blocks until at least one completion (I/O or
  // wake-up) is available or the engine made progress (below). Returns a
  // negative errno if the engine itself failed (not an I/O error: those
  // arrive as completions), else how many events it handled: every
  // completion appended counts one, and so does every step of progress
  // without a completion.
  //
  // Progress without a completion: an engine that serves one request with
  // several I/Os of its own, one after another (a format layer reading its
  // metadata, then the data; a decorator that fans out), consumes the
  // completion of one inner I/O and issues the next without appending
  // anything for its caller. It counts that step. So a return of 0 means
  // nothing happened, and a return larger than the completions appended
  // means follow-up I/O is queued that perhaps only a later Run() submits:
  // the caller must call Run() again before it sleeps anywhere else (a
  // Run(wait=true) is such a call: it submits before it waits). A caller
  // that takes a return of 0 for idle and anything else for work keeps the
  // rule. Decorators pass their inner engine's count on with their own.
  virtual int Run(bool wait, std::vector<IoCompletion>& out) = 0;

  // As Run(wait=true), but the wait also ends when CLOCK_MONOTONIC reaches
  // `deadline_ns` (io/deadline.h), with nothing appended if nothing arrived:
  // the loop's own sleep with a deadline, for a caller that has something
  // to do at a given time (the delay model's due times). Unlike Run(), it
  // sleeps until the deadline even when nothing could complete. An engine
  // on a borrowed ring never sleeps (its owner does) and returns at once.
  virtual int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) = 0;

  // Requests accepted by Queue() whose completion Run() has not returned yet.
  virtual uint32_t inflight() const = 0;

  // Whether a thread that spins on its CPU for the completion of what is in
  // flight (--poll-us), instead of sleeping, could see it come: false while
  // some of it waits for a kernel thread to run on that CPU first (the
  // uring engine's flushes: io/spin_policy.h), which the spin would only
  // keep off the CPU. Callers then sleep at once. Default: true.
  virtual bool completes_while_spinning() const { return true; }

  // Offers memory that requests will use, so that an engine can register it
  // once (io_uring fixed buffers) instead of per request. Buffer i is what
  // IoRequest::buffer_index == i refers to. Optional: the default ignores
  // it, and a failed registration only means requests go the ordinary way.
  // Call before the first Queue()/Run().
  virtual void OfferBuffers(std::vector<iovec> buffers) { (void)buffers; }

  // Whether offered buffers are in use (registered). Any thread may ask.
  virtual bool uses_fixed_buffers() const { return false; }

  // Moves what the engine counted of its metadata work since the last call
  // into `out` (adding) and returns true, or returns false when it has
  // nothing to report (an engine without a format: the default). A format
  // engine does its metadata work inside Queue(), so a caller that takes
  // the counts right after Queue() knows which request caused them.
  virtual bool TakeFormatCounts(FormatCounts& out) {
    (void)out;
    return false;
  }
};

}  // namespace pvdisk::io
