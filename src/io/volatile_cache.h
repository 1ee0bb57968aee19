// VolatileCache: a disk with a volatile write cache (`--disk IMG,
// cache=volatile`), as the kernel's block layer models one
// (Documentation/block/writeback_cache_control.rst): a FLUSH makes every
// write that completed before it was issued durable; between flushes
// nothing is ordered, so after a power cut any subset of the unflushed
// writes may have reached the medium, each whole or not at all.
//
// Withheld writes: a write completes once its data is copied here; the
// image file sees it only when a flush writes the cache out (then
// fdatasync). Reads of the image are overlaid with the data held (the
// newest write of each byte wins). So the image file holds exactly the
// durable state at any time, and a power cut (PowerCut) decides which held
// writes reach it: none, all, or a random subset by seed. The other design,
// an undo log (write through, save the old sectors before their first
// overwrite since the last flush), would read every sector before its first
// overwrite; holding costs a copy per write and nothing per read when
// nothing is held.
//
// Memory is bounded: held bytes (the sum of the held writes' lengths) stay
// within `limit_bytes`; a write that would pass it first writes the cache
// out to the image, a flush of its own, counted in `full_flushes` (the
// write-out is what makes writes durable in the model; the fdatasync of a
// flush request is for the host's crash, which plain writes do not get
// either).
//
// Discards and write-zeroes go to the image at once; the writes held
// before one are written out first (not synced), so that it lands over
// them. A power cut does not undo a discard: the model allows it to have
// reached the medium.
//
// One cache per disk, shared by every engine of the disk (each backend
// thread's): one mutex serialises writes, flushes and the power cut; reads
// take it only while something is held. Write-outs are synchronous
// pwritev(2)s of the image's file descriptor, on the thread of the request
// that causes them.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

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
  uint64_t full_flushes = 0;      // of which: a write found the cache full
};

class VolatileCache {
 public:
  // Recycled buffers of held data, by size class (powers of two from 4
  // KiB): a fresh buffer per write would cost a page fault per page of it
  // (glibc maps large allocations anew each time). Keeps at most as many
  // bytes as the cache holds, so a cache uses at most about four times
  // cache_size= (held data rounded up to its class, and as much pooled).
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
  VolatileCache(int fd, std::string name, uint64_t limit_bytes,
                bool lying_flush);

  // Hot path, any engine's thread. Each returns 0 or a negative errno;
  // -EIO once the power is cut.
  //
  // Holds a copy of the write's data (`length` bytes from `iov`); the
  // write is complete when this returns.
  int Write(uint64_t offset, const iovec* iov, int iov_count, uint64_t length);
  // Writes out every held write and syncs the image.
  int Flush();
  // Before a discard or write-zeroes: writes out what is held (no sync).
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
  // completed, then a sync. FailedPrecondition if the power is cut already.
  absl::StatusOr<PowerCutResult> PowerCut(PowerKeep keep, uint64_t seed);
  // At unmount: writes everything held out and syncs (nothing after a cut).
  absl::Status WriteOutAll();

  VolatileCacheCounts counts() const;
  // Zeroes the counts and restarts unsafe_bytes_max (stats reset).
  void ResetCounts();
  uint64_t limit_bytes() const { return limit_bytes_; }

 private:
  // A write held since the last flush, in completion order.
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

  // All REQUIRES mu_.
  void Insert(uint64_t offset, uint64_t length, std::shared_ptr<Data> data);
  // Writes the newest data of every held byte to the image, contiguous
  // extents in one pwritev; then forgets what was held.
  int WriteOutLocked();
  int PwriteAll(const std::vector<iovec>& iov, uint64_t offset);
  int SyncImage();
  void Forget();

  const int fd_;
  const std::string name_;
  const uint64_t limit_bytes_;
  const bool lying_flush_;
  const std::shared_ptr<Pool> pool_;

  std::mutex mu_;
  std::vector<Held> held_;               // guarded by mu_
  std::map<uint64_t, Extent> extents_;   // by start; guarded by mu_
  std::atomic<uint64_t> held_bytes_{0};  // written under mu_
  std::atomic<bool> cut_{false};

  std::atomic<uint64_t> unsafe_bytes_max_{0};
  std::atomic<uint64_t> flushes_{0};
  std::atomic<uint64_t> full_flushes_{0};
};

}  // namespace pvdisk::io
