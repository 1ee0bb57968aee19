// VolatileCache: a disk with a volatile write cache (`--disk IMG,
// cache=volatile`), as the kernel's block layer models one
// (Documentation/block/writeback_cache_control.rst): a FLUSH makes every
// write that completed before it was issued durable; between flushes
// nothing is ordered, so after a power cut any subset of the unflushed
// writes may have reached the medium, each whole or not at all.
//
// Withheld writes: a write completes once its data is copied here; the
// image file sees it only when a write-out takes the cache's held set and
// writes it out. Reads of the image are overlaid with the data held (the
// newest write of each byte wins). So the image file holds exactly the
// durable state at any time, and a power cut (PowerCut) decides which held
// writes reach it: none, all, or a random subset by seed. The other design,
// an undo log (write through, save the old sectors before their first
// overwrite since the last flush), would read every sector before its first
// overwrite; holding costs a copy per write and nothing per read when
// nothing is held.
//
// Write-outs: one thread per cache writes the held data out, off the
// writers' path. A write-out takes the whole held set under the lock (new
// writes go on into a fresh set at once) and writes it with the lock
// released, through the cache's CacheWriter (io/volatile_cache_writer.h:
// O_DIRECT from the held buffers, several writes in flight on an io_uring
// of its own); reads see the set being written out until it is in the
// image.
// From the moment a write-out takes them the writes are the disk's to
// destage: a power cut lets a write-out under way finish, and decides only
// over the writes held after it (those are `unsafe_bytes`). A FLUSH asks
// for a write-out followed by an fdatasync and completes when that is
// done, so every write that completed before the FLUSH was issued is in
// the image and synced; flushes that arrive during a write-out share the
// next one. Write-outs follow one another, never overlap, so an older
// write-out never lands over a newer one.
//
// Memory is bounded: when the held bytes would pass half of `limit_bytes`,
// the write waits for nothing but starts a write-out (counted in
// `full_flushes`: the write-out is what makes the held writes durable in
// the model, a disk destaging its cache; no fdatasync, as no plain write
// gets one: the host's own crash is not part of the model). Only when the
// held and the written-out bytes together would pass `limit_bytes` does a
// write wait for the write-out under way (`full_waits`).
//
// Discards and write-zeroes go to the image at once; the writes held
// before one are written out first (not synced), so that it lands over
// them. A power cut does not undo a discard: the model allows it to have
// reached the medium.
//
// One cache per disk, shared by every engine of the disk (each backend
// thread's): one mutex guards the held sets; reads take it only while
// something is held or being written out. A FLUSH waits on the thread of
// the request for its write-out (the other requests of that thread wait
// with it; writers of other threads do not).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "io/volatile_cache_writer.h"

namespace pvdisk::io {

// The default bound of a cache's held bytes.
inline constexpr uint64_t kDefaultVolatileCacheBytes = 64ull << 20;

// Which unflushed writes a power cut lets reach the image.
enum class PowerKeep { kNone, kAll, kRandom };

// What a power cut did with the writes held at that moment.
struct PowerCutResult {
  uint64_t kept_writes = 0;
  uint64_t kept_bytes = 0;
  uint64_t dropped_writes = 0;
  uint64_t dropped_bytes = 0;
};

// The counters of the same names (stats/counters.h).
struct VolatileCacheCounts {
  uint64_t unsafe_bytes = 0;      // held now: lost if the power goes
  uint64_t unsafe_bytes_max = 0;  // highest unsafe_bytes since reset
  uint64_t flushes = 0;           // write-outs made durable (flush or full)
  uint64_t full_flushes = 0;      // write-outs started by a full cache
  uint64_t full_waits = 0;        // writes that waited for a write-out
};

// What the held data's buffers take (io/huge_buffer_arena.h).
struct VolatileCacheMemory {
  uint64_t arena_bytes = 0;    // the arena's address space
  bool arena_huge = false;     // advised into transparent huge pages
  uint64_t touched_bytes = 0;  // of it, the pages ever used: resident
  uint64_t used_bytes = 0;     // of it, the blocks holding data now
  uint64_t outside_bytes = 0;  // buffers outside the arena now
  uint64_t outside_takes = 0;  // buffers ever taken outside it
};

class VolatileCache {
 public:
  // The held data's buffers, by size class (powers of two from 4 KiB):
  // blocks of an arena in 2 MiB huge pages of twice cache_size= (plus one
  // page), reused from write to write; what the arena cannot hold (a
  // write over 2 MiB, or no block free) is allocated apart and counted.
  // So a cache's buffers take about twice cache_size= of memory.
  class Pool;

  // Held data of one write: `size` bytes at a 4096-aligned address, so that
  // it can be written to a file opened with O_DIRECT. Goes back to its pool.
  struct Data {
    Data(std::shared_ptr<Pool> pool, uint64_t size);
    ~Data();
    Data(const Data&) = delete;
    Data& operator=(const Data&) = delete;
    uint8_t* bytes = nullptr;
    uint64_t size_class = 0;
    std::shared_ptr<Pool> pool;
  };

  // What a read must lay over the bytes it read from the image: `length`
  // bytes at `offset` (of the image) from `data`.
  struct Piece {
    uint64_t offset = 0;
    uint64_t length = 0;
    std::shared_ptr<Data> owner;  // keeps `data` alive
    const uint8_t* data = nullptr;
  };
  using Overlay = std::vector<Piece>;

  // Over the image open as `fd` (not owned; open while the cache lives),
  // named `name` in messages. `lying_flush` (test only, io/test_fault.h):
  // a flush completes without writing anything out, breaking the model on
  // purpose, so that tests can show their checks catch that.
  // Starts the cache's write-out thread.
  VolatileCache(int fd, std::string name, uint64_t limit_bytes,
                bool lying_flush);
  // Stops the write-out thread; what is still held is dropped (WriteOutAll
  // first to keep it).
  ~VolatileCache();
  VolatileCache(const VolatileCache&) = delete;
  VolatileCache& operator=(const VolatileCache&) = delete;

  // Hot path, any engine's thread. Each returns 0 or a negative errno;
  // -EIO once the power is cut.
  //
  // Holds a copy of the write's data (`length` bytes from `iov`); the
  // write is complete when this returns (it waits only when the cache is
  // full, see above). A failed write-out fails every later request: the
  // writes it held are lost.
  int Write(uint64_t offset, const iovec* iov, int iov_count, uint64_t length);
  // Returns once every write that completed before the call is written out
  // and the image synced.
  int Flush();
  // Before a discard or write-zeroes: returns once what is held is written
  // out (no sync).
  int WriteOutBeforeDiscard();

  bool cut() const { return cut_.load(std::memory_order_acquire); }

  // The held data overlapping [offset, offset + length), into `out`
  // (cleared first): what a read issued now must show over the image's
  // bytes. Empty, without taking the lock, when nothing is held.
  void OverlayFor(uint64_t offset, uint64_t length, Overlay* out);
  // Copies `overlay` into the buffers of a read of `offset`.
  static void Apply(const Overlay& overlay, uint64_t offset, const iovec* iov,
                    int iov_count);

  // Control path. The power goes: every later request fails with -EIO, and
  // the image gets the held writes `keep` says (kRandom: each write with
  // probability 1/2, reproducible from `seed`), in the order they
  // completed, then a sync; a write-out under way finishes first.
  // FailedPrecondition if the power is cut already.
  absl::StatusOr<PowerCutResult> PowerCut(PowerKeep keep, uint64_t seed);
  // At unmount: writes everything held out and syncs (nothing after a cut).
  absl::Status WriteOutAll();

  VolatileCacheCounts counts() const;
  VolatileCacheMemory memory() const;
  // Zeroes the counts and restarts unsafe_bytes_max (stats reset).
  void ResetCounts();
  uint64_t limit_bytes() const { return limit_bytes_; }

 private:
  // A write held since the last write-out took the held set, in
  // completion order.
  struct Held {
    uint64_t offset;
    uint64_t length;
    std::shared_ptr<Data> data;
  };
  // Bytes [start, end) of the newest held data: `data` + `data_offset`.
  struct Extent {
    uint64_t end;
    std::shared_ptr<Data> data;
    uint64_t data_offset;
  };
  // Writes in completion order, and the newest data of each byte by start.
  struct Set {
    std::vector<Held> held;
    std::map<uint64_t, Extent> extents;
    uint64_t bytes = 0;  // the sum of the held writes' lengths
  };

  // The write-out thread's loop.
  void WriteOutLoop();
  // REQUIRES mu_ held and no write-out under way: `out_` takes the held
  // set and the thread writes it out; with `flush_ticket` > 0, it syncs
  // the image after and completes the flushes up to that ticket.
  void StartWriteOutLocked(uint64_t flush_ticket);
  // REQUIRES mu_ held by `lock`: waits until no write-out is under way.
  void WaitWriteOutLocked(std::unique_lock<std::mutex>& lock);
  static void Insert(Set& set, uint64_t offset, uint64_t length,
                     std::shared_ptr<Data> data);
  // Writes the newest data of every byte of `set` to the image. Called
  // by whoever holds the writer: the write-out thread during a write-out,
  // else a caller under mu_.
  int WriteSet(const Set& set);
  int SyncImage();

  const int fd_;
  const std::string name_;
  const uint64_t limit_bytes_;
  const bool lying_flush_;
  const std::shared_ptr<Pool> pool_;
  // Used by the write-out thread while `writing_`, else under mu_.
  CacheWriter writer_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // the thread: a write-out or stop
  std::condition_variable done_cv_;  // waiters: a write-out finished
  Set held_;                         // guarded by mu_
  // The set being written out: set under mu_ while no write-out is under
  // way, then read by the thread without mu_ until it clears `writing_`.
  Set out_;
  bool writing_ = false;      // guarded by mu_
  bool stop_ = false;         // guarded by mu_
  uint64_t out_ticket_ = 0;   // guarded by mu_; 0: no sync
  uint64_t flush_asked_ = 0;  // the last flush ticket; guarded by mu_
  uint64_t flush_done_ = 0;   // flushes up to it are done; by mu_
  int error_ = 0;             // a failed write-out's; guarded by mu_
  std::atomic<uint64_t> held_bytes_{0};     // held_.bytes, written under mu_
  std::atomic<uint64_t> overlay_bytes_{0};  // held_ + out_, under mu_
  std::atomic<bool> cut_{false};

  std::atomic<uint64_t> unsafe_bytes_max_{0};
  std::atomic<uint64_t> flushes_{0};
  std::atomic<uint64_t> full_flushes_{0};
  std::atomic<uint64_t> full_waits_{0};

  std::thread thread_;  // last: starts once everything above is ready
};

}  // namespace pvdisk::io
