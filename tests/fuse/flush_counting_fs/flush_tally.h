// What the flush-counting file system has seen per file: the FSYNC, FLUSH
// and FSYNCDIR requests the kernel sent it, and the bytes written, so that a
// test can tell whether a flush reached the file system an image lives on,
// and whether it came after the writes it must cover.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace pvdisk::flush_counting_fs {

struct FileTally {
  uint64_t fsync = 0;      // FSYNC with datasync == 0
  uint64_t fdatasync = 0;  // FSYNC with datasync != 0
  uint64_t flush = 0;      // FLUSH (sent on every close of a descriptor)
  uint64_t fsyncdir = 0;   // FSYNCDIR on a directory
  uint64_t written = 0;    // bytes of WRITE requests answered with success
  // `written` when the latest FSYNC arrived: everything written before it
  // is what that FSYNC made durable.
  uint64_t written_at_last_fsync = 0;
};

// Thread-safe: libfuse calls the operations from several threads.
class FlushTally {
 public:
  void RecordWrite(const std::string& path, uint64_t bytes);
  void RecordFsync(const std::string& path, bool datasync);
  void RecordFlush(const std::string& path);
  void RecordFsyncDir(const std::string& path);

  // One line per path seen, sorted by path:
  //   PATH fsync=N fdatasync=N flush=N fsyncdir=N written=N
  //   written_at_last_fsync=N
  // (on one line; PATH is relative to the root, no spaces in it expected).
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, FileTally> files_;
};

// Parses Render()'s text back (for the tests); a path absent from the text
// gets an all-zero tally.
FileTally ParseTally(const std::string& text, const std::string& path);

}  // namespace pvdisk::flush_counting_fs
