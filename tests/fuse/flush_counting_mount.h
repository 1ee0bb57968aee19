// A mount of the tests' flush-counting file system (flush_counting_fs/):
// files of a backing directory passed through, with the FSYNC, FLUSH and
// FSYNCDIR requests the kernel sends for each counted. An image kept on it
// shows whether pvdisk's flushes reach the image's own file system.
#pragma once

#include <memory>
#include <string>

#include "flush_counting_fs/flush_tally.h"
#include "fuse_harness.h"

namespace pvdisk::fuse_testing {

using flush_counting_fs::FileTally;

class FlushCountingMount {
 public:
  // Serves `backing_dir` at `mountpoint` (both existing directories) and
  // waits until the mount is there.
  FlushCountingMount(const std::string& backing_dir, std::string mountpoint);
  // Unmounts (fusermount3 -u) and waits for the file system to exit; kills
  // it if it does not. Close every file of the mount first.
  ~FlushCountingMount();
  FlushCountingMount(const FlushCountingMount&) = delete;
  FlushCountingMount& operator=(const FlushCountingMount&) = delete;

  bool ok() const { return ok_; }
  // Why the mount failed (its output), for test messages.
  std::string Describe() const;
  const std::string& mountpoint() const { return mountpoint_; }
  std::string Path(const std::string& name) const {
    return mountpoint_ + "/" + name;
  }

  // What the file system has seen for the file `name` (in its root) so far.
  FileTally CountsOf(const std::string& name) const;

 private:
  std::string mountpoint_;
  std::unique_ptr<BackgroundProcess> process_;
  bool ok_ = false;
};

}  // namespace pvdisk::fuse_testing
