// A disk's write log (`--disk IMG,log=FILE`): every write, discard, flush
// and mark the disk completed, appended in completion order to FILE in
// dm-log-writes' format (write_log_format.h).
//
// One WriteLog per disk, shared by the engines of all its queues (the log
// engine, log_engine.h, appends from the backend threads). Each append
// takes the log's mutex for the time of one pwritev(2) of the entry's
// header and data into the file (the page cache; the log is not synced per
// entry): the queues of one disk append one after another, so a logged disk
// copies every written byte once more, under one lock.
//
// The superblock's nr_entries is rewritten at every flush, mark and at
// Close() (as the kernel rewrites it at marks and FUA writes): a reader
// sees every entry up to the last of those. Close() also appends the mark
// "dm-log-writes-end", as the kernel does when its target goes.
//
// If an append fails (the log's file system is full), logging stops: the
// log keeps the entries written before, the disk goes on, and failed()
// says why. The disk's I/O never fails because of its log.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
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
  WriteLog(std::string path, std::string temp_path, int fd);
  // Appends one entry (header sector, then `data`) at the end. REQUIRES mu_.
  int AppendLocked(uint64_t sector, uint64_t nr_sectors, uint64_t flags,
                   std::string_view mark, const iovec* data, int data_count);
  int WriteSuperLocked();
  void FailLocked(int error, const char* what);

  const std::string path_;
  const std::string temp_path_;  // the file's name until Publish()
  const int fd_;
  std::atomic<bool> published_{false};
  mutable std::mutex mu_;
  uint64_t end_ = 0;         // where the next entry goes; guarded by mu_
  uint64_t nr_entries_ = 0;  // guarded by mu_
  bool closed_ = false;      // guarded by mu_
  std::string failed_;       // guarded by mu_
  std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace pvdisk::io
