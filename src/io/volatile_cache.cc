#include "io/volatile_cache.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/thread.h"
#include "io/huge_buffer_arena.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kDataAlign = 4096;

// Copies `length` bytes from `from` into the buffers `iov`, starting `skip`
// bytes into them.
void CopyIntoIov(const uint8_t* from, uint64_t length, uint64_t skip,
                 const iovec* iov, int iov_count) {
  for (int i = 0; i < iov_count && length > 0; ++i) {
    if (skip >= iov[i].iov_len) {
      skip -= iov[i].iov_len;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(iov[i].iov_len - skip, length);
    std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + skip, from, n);
    from += n;
    length -= n;
    skip = 0;
  }
}

}  // namespace

// The held data's buffers: blocks of a huge-page arena (huge_buffer_arena.h)
// of twice the cache's bound plus a huge page, which holds every write
// the bound lets the cache hold (each rounded up to a power of two); a
// buffer the arena has no block for (a write over 2 MiB, or an arena too
// fragmented) is an ordinary allocation, counted.
class VolatileCache::Pool {
 public:
  explicit Pool(uint64_t limit_bytes)
      : arena_(2 * limit_bytes + HugeBufferArena::kHugePage) {}

  static uint64_t ClassOf(uint64_t size) {
    return HugeBufferArena::BlockFor(size);
  }

  uint8_t* Take(uint64_t size_class) {
    if (uint8_t* block = arena_.Take(size_class); block != nullptr) {
      return block;
    }
    auto* buffer =
        static_cast<uint8_t*>(std::aligned_alloc(kDataAlign, size_class));
    if (buffer != nullptr) {
      outside_bytes_.fetch_add(size_class, std::memory_order_relaxed);
      outside_takes_.fetch_add(1, std::memory_order_relaxed);
    }
    return buffer;
  }

  void Give(uint8_t* buffer, uint64_t size_class) {
    if (arena_.Owns(buffer)) {
      arena_.Give(buffer, size_class);
      return;
    }
    outside_bytes_.fetch_sub(size_class, std::memory_order_relaxed);
    std::free(buffer);
  }

  VolatileCacheMemory memory() const {
    VolatileCacheMemory memory;
    memory.arena_bytes = arena_.capacity();
    memory.arena_huge = arena_.advised_huge();
    memory.touched_bytes = arena_.touched_bytes();
    memory.used_bytes = arena_.used_bytes();
    memory.outside_bytes = outside_bytes_.load(std::memory_order_relaxed);
    memory.outside_takes = outside_takes_.load(std::memory_order_relaxed);
    return memory;
  }

 private:
  HugeBufferArena arena_;
  std::atomic<uint64_t> outside_bytes_{0};
  std::atomic<uint64_t> outside_takes_{0};
};

VolatileCache::Data::Data(std::shared_ptr<Pool> from, uint64_t size)
    : size_class(Pool::ClassOf(size)), pool(std::move(from)) {
  bytes = pool->Take(size_class);
}

VolatileCache::Data::~Data() {
  if (bytes != nullptr) pool->Give(bytes, size_class);
}

VolatileCache::VolatileCache(int fd, std::string name, uint64_t limit_bytes,
                             bool lying_flush)
    : fd_(fd),
      name_(std::move(name)),
      limit_bytes_(limit_bytes),
      lying_flush_(lying_flush),
      pool_(std::make_shared<Pool>(limit_bytes)),
      writer_(fd) {
  thread_ =
      StartThreadWithoutSignals("pvdisk-writeout", [this] { WriteOutLoop(); });
}

VolatileCache::~VolatileCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

int VolatileCache::Write(uint64_t offset, const iovec* iov, int iov_count,
                         uint64_t length) {
  if (cut()) return -EIO;
  // The copy outside the lock: writes of several threads copy at once.
  auto data = std::make_shared<Data>(pool_, length);
  if (data->bytes == nullptr) return -ENOMEM;
  uint64_t copied = 0;
  for (int i = 0; i < iov_count && copied < length; ++i) {
    const uint64_t n = std::min<uint64_t>(iov[i].iov_len, length - copied);
    std::memcpy(data->bytes + copied, iov[i].iov_base, n);
    copied += n;
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cut()) return -EIO;
    if (error_ < 0) return error_;
    if (held_.held.empty()) break;
    if (!writing_ && held_.bytes + length > limit_bytes_ / 2) {
      // Full: a write-out of its own, which this write does not wait for.
      StartWriteOutLocked(0);
      full_flushes_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (writing_ && held_.bytes + out_.bytes + length > limit_bytes_) {
      full_waits_.fetch_add(1, std::memory_order_relaxed);
      done_cv_.wait(lock);
      continue;
    }
    break;
  }
  Insert(held_, offset, length, data);
  held_.held.push_back(Held{offset, length, std::move(data)});
  held_.bytes += length;
  overlay_bytes_.fetch_add(length, std::memory_order_release);
  held_bytes_.store(held_.bytes, std::memory_order_relaxed);
  uint64_t seen = unsafe_bytes_max_.load(std::memory_order_relaxed);
  while (held_.bytes > seen &&
         !unsafe_bytes_max_.compare_exchange_weak(seen, held_.bytes,
                                                  std::memory_order_relaxed)) {
  }
  return 0;
}

int VolatileCache::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (cut()) return -EIO;
  // Test only: the flush completes, its writes stay at risk.
  if (lying_flush_) return 0;
  if (error_ < 0) return error_;
  const uint64_t ticket = ++flush_asked_;
  // A write-out under way took only writes held before this flush; the
  // thread starts the one for this ticket when it ends.
  if (!writing_) StartWriteOutLocked(ticket);
  done_cv_.wait(lock,
                [&] { return flush_done_ >= ticket || cut() || error_ < 0; });
  if (error_ < 0) return error_;
  if (flush_done_ < ticket) return -EIO;  // the power went first
  return 0;
}

int VolatileCache::WriteOutBeforeDiscard() {
  std::unique_lock<std::mutex> lock(mu_);
  if (cut()) return -EIO;
  WaitWriteOutLocked(lock);
  if (!held_.held.empty() && !cut()) {
    StartWriteOutLocked(0);
    WaitWriteOutLocked(lock);
  }
  if (cut()) return -EIO;
  return error_;
}

void VolatileCache::OverlayFor(uint64_t offset, uint64_t length, Overlay* out) {
  out->clear();
  if (overlay_bytes_.load(std::memory_order_acquire) == 0) return;
  const uint64_t end = offset + length;
  std::lock_guard<std::mutex> lock(mu_);
  // The set being written out first, then the newer held one over it.
  for (const Set* set : {&out_, &held_}) {
    const std::map<uint64_t, Extent>& extents = set->extents;
    auto it = extents.upper_bound(offset);
    if (it != extents.begin()) {
      auto before = std::prev(it);
      if (before->second.end > offset) it = before;
    }
    for (; it != extents.end() && it->first < end; ++it) {
      const uint64_t from = std::max(it->first, offset);
      const uint64_t to = std::min(it->second.end, end);
      out->push_back(Piece{from, to - from, it->second.data,
                           it->second.data->bytes + it->second.data_offset +
                               (from - it->first)});
    }
  }
}

void VolatileCache::Apply(const Overlay& overlay, uint64_t offset,
                          const iovec* iov, int iov_count) {
  for (const Piece& piece : overlay) {
    CopyIntoIov(piece.data, piece.length, piece.offset - offset, iov,
                iov_count);
  }
}

absl::StatusOr<PowerCutResult> VolatileCache::PowerCut(PowerKeep keep,
                                                       uint64_t seed) {
  std::unique_lock<std::mutex> lock(mu_);
  if (cut()) {
    return absl::FailedPreconditionError(absl::StrCat(
        name_, " has lost its power already; unmount and mount it again"));
  }
  cut_.store(true, std::memory_order_release);
  done_cv_.notify_all();  // flushes waiting fail with -EIO
  // The write-out under way was the disk's to destage: it finishes.
  WaitWriteOutLocked(lock);
  PowerCutResult result;
  std::mt19937_64 random(seed);
  int rc = 0;
  for (const Held& held : held_.held) {
    const bool kept = keep == PowerKeep::kAll ||
                      (keep == PowerKeep::kRandom && (random() & 1) != 0);
    if (!kept) {
      ++result.dropped_writes;
      result.dropped_bytes += held.length;
      continue;
    }
    ++result.kept_writes;
    result.kept_bytes += held.length;
    // One at a time: held writes may overlap, and the newer must land last.
    rc = writer_.Write(
        {CacheWriter::Piece{held.offset, held.data->bytes, held.length}});
    if (rc < 0) break;
  }
  held_ = Set();
  held_bytes_.store(0, std::memory_order_relaxed);
  overlay_bytes_.store(0, std::memory_order_release);
  if (rc < 0) {
    return ErrnoError(-rc, absl::StrCat("writing the kept writes to ", name_,
                                        " at the power cut failed"));
  }
  if (rc = SyncImage(); rc < 0) {
    return ErrnoError(
        -rc, absl::StrCat("fdatasync of ", name_, " at the power cut failed"));
  }
  return result;
}

absl::Status VolatileCache::WriteOutAll() {
  std::unique_lock<std::mutex> lock(mu_);
  if (cut()) return absl::OkStatus();
  WaitWriteOutLocked(lock);
  const uint64_t ticket = ++flush_asked_;
  StartWriteOutLocked(ticket);
  done_cv_.wait(lock, [&] { return flush_done_ >= ticket || cut(); });
  if (error_ < 0) {
    return ErrnoError(
        -error_,
        absl::StrCat("writing the volatile cache out to ", name_, " failed"));
  }
  return absl::OkStatus();
}

VolatileCacheCounts VolatileCache::counts() const {
  VolatileCacheCounts counts;
  counts.unsafe_bytes = held_bytes_.load(std::memory_order_relaxed);
  counts.unsafe_bytes_max = unsafe_bytes_max_.load(std::memory_order_relaxed);
  counts.flushes = flushes_.load(std::memory_order_relaxed);
  counts.full_flushes = full_flushes_.load(std::memory_order_relaxed);
  counts.full_waits = full_waits_.load(std::memory_order_relaxed);
  return counts;
}

VolatileCacheMemory VolatileCache::memory() const { return pool_->memory(); }

void VolatileCache::ResetCounts() {
  flushes_.store(0, std::memory_order_relaxed);
  full_flushes_.store(0, std::memory_order_relaxed);
  full_waits_.store(0, std::memory_order_relaxed);
  unsafe_bytes_max_.store(held_bytes_.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
}

void VolatileCache::StartWriteOutLocked(uint64_t flush_ticket) {
  out_ = std::move(held_);
  held_ = Set();
  held_bytes_.store(0, std::memory_order_relaxed);
  out_ticket_ = flush_ticket;
  writing_ = true;
  work_cv_.notify_one();
}

void VolatileCache::WaitWriteOutLocked(std::unique_lock<std::mutex>& lock) {
  done_cv_.wait(lock, [&] { return !writing_; });
}

void VolatileCache::WriteOutLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return writing_ || stop_; });
    if (!writing_) return;
    const uint64_t ticket = out_ticket_;
    lock.unlock();
    // A power cut waits for this write-out, so it writes and syncs even
    // when the power goes meanwhile: the sync makes the flushes it covers
    // keep their promise.
    int rc = WriteSet(out_);
    if (rc == 0 && ticket != 0) rc = SyncImage();
    lock.lock();
    const uint64_t written = out_.bytes;
    out_ = Set();
    overlay_bytes_.fetch_sub(written, std::memory_order_release);
    writing_ = false;
    if (rc < 0 && error_ == 0) error_ = rc;
    if (ticket != 0) flush_done_ = ticket;
    flushes_.fetch_add(1, std::memory_order_relaxed);
    // Flushes that came during this write-out: the next one is theirs
    // (after a power cut or a failure they fail instead).
    if (flush_asked_ > flush_done_ && !cut() && error_ == 0) {
      StartWriteOutLocked(flush_asked_);
    }
    done_cv_.notify_all();
  }
}

void VolatileCache::Insert(Set& set, uint64_t offset, uint64_t length,
                           std::shared_ptr<Data> data) {
  std::map<uint64_t, Extent>& extents = set.extents;
  const uint64_t end = offset + length;
  // An extent that starts before the write and reaches into it keeps its
  // head, and its tail past the write if it has one.
  auto it = extents.lower_bound(offset);
  if (it != extents.begin()) {
    auto before = std::prev(it);
    Extent& extent = before->second;
    if (extent.end > offset) {
      if (extent.end > end) {
        extents.emplace(end,
                        Extent{extent.end, extent.data,
                               extent.data_offset + (end - before->first)});
      }
      extent.end = offset;
    }
  }
  // Extents that start inside the write go, but for a tail past it.
  it = extents.lower_bound(offset);
  while (it != extents.end() && it->first < end) {
    if (it->second.end <= end) {
      it = extents.erase(it);
      continue;
    }
    Extent rest = it->second;
    rest.data_offset += end - it->first;
    extents.erase(it);
    extents.emplace(end, std::move(rest));
    break;
  }
  extents.emplace(offset, Extent{end, std::move(data), 0});
}

int VolatileCache::WriteSet(const Set& set) {
  std::vector<CacheWriter::Piece> pieces;
  pieces.reserve(set.extents.size());
  for (const auto& [start, extent] : set.extents) {
    pieces.push_back(CacheWriter::Piece{
        start, extent.data->bytes + extent.data_offset, extent.end - start});
  }
  return writer_.Write(pieces);
}

int VolatileCache::SyncImage() { return writer_.Sync(); }

}  // namespace pvdisk::io
