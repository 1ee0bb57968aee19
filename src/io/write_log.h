// A disk's write log (`--disk IMG,log=FILE`): every write, discard, flush
// and mark the disk completed, appended in completion order to FILE in
// dm-log-writes' format (write_log_format.h).
//
// One WriteLog per disk, shared by the engines of all its queues (the log
// engine, log_engine.h, appends from the backend threads). An append takes
// the log's mutex only to reserve its place (the entry's number and
// offset); it writes the entry's header and data outside the lock, with
// one pwritev(2) into the page cache, so the queues of a disk append side
// by side (the copy of every written byte into the log's page cache stays;
// O_DIRECT appends from the request's buffers were tried and cost more:
// each small append became a synchronous device write that extends the
// file). The log is not synced per entry.
//
// The superblock's nr_entries is rewritten at every flush, mark and at
// Close() (as the kernel rewrites it at marks and FUA writes), once every
// entry before it is written: it counts the entries written without a gap,
// so a reader sees every entry up to the last of those, whole. Close()
// also appends the mark "dm-log-writes-end", as the kernel does when its
// target goes.
//
// With --backend process the log is written in the disk's backend process
// (where the I/O is done): the daemon makes the file (Create) and keeps it
// only to publish or remove it (HandOff), and the backend appends to the
// same open file (Adopt of a duplicate of fd()).
//
// If an append fails (the log's file system is full), logging stops: the
// log keeps the entries written before, the disk goes on, and failed()
// says why. The disk's I/O never fails because of its log.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pvdisk::io {

struct WriteLogCounts {
  uint64_t entries = 0;  // entries appended (all kinds)
  uint64_t bytes = 0;    // bytes appended to the file (headers and data)
};

class WriteLog {
 public:
  // Writes an empty log's superblock to a new file beside `path` (a
  // hidden temporary name in the same folder), so that nothing at `path`
  // changes until Publish(). The error names the file and why it cannot be
  // written (`path` a folder, the folder not writable).
  static absl::StatusOr<std::shared_ptr<WriteLog>> Create(
      const std::string& path);
  // Once the disk serves: renames the log to `path`, replacing a file
  // there (as a shell's `>` would, but only now). A log never published
  // (the mount failed) is removed when it is destroyed. Idempotent.
  absl::Status Publish();

  // The log Create() just made (its superblock and no entry), appended to
  // by another process: this object keeps the file only to publish it, or
  // to remove it if the disk never served. It appends nothing (appends
  // fail with -EIO) and Close() writes nothing (the end mark is the
  // appender's). Call before anything is appended.
  void HandOff();
  // The appending side of a handed-off log: takes `fd` (owned from here,
  // even on error), an open of a log Create() made that holds nothing but
  // its superblock, and appends from its first entry. `path` names it in
  // messages. Never renames or removes the file. FailedPrecondition if the
  // file holds more than an empty log (its superblock counts entries, or
  // it is longer).
  static absl::StatusOr<std::shared_ptr<WriteLog>> Adopt(int fd,
                                                         std::string path);
  int fd() const { return fd_; }
  ~WriteLog();
  WriteLog(const WriteLog&) = delete;
  WriteLog& operator=(const WriteLog&) = delete;

  // Hot path; any thread. `offset` and `length` in bytes, multiples of the
  // sector size (512); `iov` carries `length` bytes. Returns 0, or a
  // negative errno once logging has stopped.
  int AppendWrite(uint64_t offset, const iovec* iov, int iov_count,
                  uint64_t length);
  // A discard, or a write of zeros (replayed as a discard: the range reads
  // as zeros afterwards).
  int AppendDiscard(uint64_t offset, uint64_t length);
  // A completed flush; rewrites the superblock.
  int AppendFlush();
  // Control path. `name`: 1 to kMaxMarkLength printable characters, no
  // whitespace (InvalidArgument otherwise). Rewrites the superblock.
  absl::Status AppendMark(std::string_view name);

  // Appends the end mark, rewrites the superblock and syncs the file.
  // Appends after it are refused. Idempotent.
  absl::Status Close();

  const std::string& path() const { return path_; }
  WriteLogCounts counts() const;
  void ResetCounts();
  // Empty while logging goes on; else why it stopped.
  std::string failed() const;

 private:
  // An entry's place: its number and its offset in the file.
  struct Slot {
    uint64_t seq = 0;
    uint64_t at = 0;
  };

  WriteLog(std::string path, std::string temp_path, int fd);
  // Appends one entry (header sector, then `data` padded to whole
  // sectors): reserves its place under mu_, writes it without. `seq` gets
  // the entry's number. With `closing`, a closed log takes it still (the
  // end mark).
  int Append(uint64_t sector, uint64_t nr_sectors, uint64_t flags,
             std::string_view mark, const iovec* data, int data_count,
             uint64_t* seq, bool closing = false);
  int WriteEntry(const Slot& slot, const uint8_t* header, const iovec* data,
                 int data_count, uint64_t data_bytes);
  // Waits until entries 0..`seq` are written, then has the superblock count
  // every entry written without a gap. 0 or a negative errno.
  int UpdateSuper(uint64_t seq);
  void FailLocked(int error, const char* what);

  const std::string path_;
  const std::string temp_path_;  // the file's name until Publish()
  const int fd_;
  std::atomic<bool> published_{false};
  bool handed_off_ = false;  // HandOff(); set before the disk serves
  mutable std::mutex mu_;
  std::condition_variable written_cv_;  // an entry was written
  uint64_t end_ = 0;            // where the next entry goes; guarded by mu_
  uint64_t nr_entries_ = 0;     // entries reserved; guarded by mu_
  std::set<uint64_t> writing_;  // entries reserved, not yet written; by mu_
  uint64_t waiters_ = 0;        // threads in UpdateSuper; guarded by mu_
  uint64_t failed_seq_ = UINT64_MAX;  // the first failed entry; by mu_
  bool closed_ = false;               // guarded by mu_
  std::string failed_;                // guarded by mu_
  std::mutex super_mu_;               // one superblock write at a time
  uint64_t super_entries_ = 0;        // what it says; guarded by super_mu_
  std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace pvdisk::io
