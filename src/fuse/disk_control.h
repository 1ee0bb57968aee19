// The mount's hidden `.control` file, through which `pvdisk attach` and
// `pvdisk detach` reach the daemon (the daemon never touches its own
// mountpoint: the client writes into it).
//
// A client opens it read-write, writes one command and reads back one line:
// "ok" or what was wrong. A command is its words separated by newlines:
//   attach\n<the words of pvdisk attach after MOUNTPOINT>
//   detach\nNAME[\n--force]
// The write succeeds with the command's length, or fails with the
// command's errno (ControlErrno: EBUSY for an open disk, ENOENT for an
// unknown one, EEXIST for a name in use, ENOMEM over the memory budget,
// EOPNOTSUPP for a disk its placement keeps, EIO for a drain given up,
// EINVAL for the rest); the line read back says the same in words.
//
// Only the mount's owner may use it: the file is 0600 and its owner's (the
// kernel checks that under default_permissions), and the daemon refuses
// an open by any other uid (root's included) with EACCES.
//
// Commands run on a thread of their own, one at a time, so that opening an
// image or draining a disk never holds up a FUSE thread, and with it the
// other disks' requests.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pvdisk::fuse {

inline constexpr const char* kControlName = ".control";

struct ControlRequest {
  enum class Command { kAttach, kDetach };
  Command command = Command::kAttach;
  // kAttach: the words of `pvdisk attach` after the mountpoint.
  std::vector<std::string> words;
  // kDetach: the disk and --force.
  std::string disk;
  bool force = false;
};

// Parses one write to the control file. InvalidArgument naming what was
// written and what is allowed.
absl::StatusOr<ControlRequest> ParseControlRequest(std::string_view text);
// The text of `request` (what the client writes).
std::string FormatControlRequest(const ControlRequest& request);

// The errno a command's status answers the write with.
int ControlErrno(const absl::Status& status);

// An open control file: the answer of its last command.
struct ControlHandle {
  std::mutex mu;
  std::string answer;
};

// The thread the commands run on.
class ControlWorker {
 public:
  ControlWorker();
  // Stop().
  ~ControlWorker();
  // Runs `job` on the worker thread, after the ones queued before it.
  void Post(std::function<void()> job);
  // Runs the jobs queued, then ends the thread. Idempotent.
  void Stop();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pvdisk::fuse
