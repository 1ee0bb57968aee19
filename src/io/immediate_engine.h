// Base for engines that finish each request inside Queue() (sync and null):
// the result waits in a list until the next Run() returns it, and Run(wait)
// blocks in ppoll() on the watched eventfds when there is nothing to return
// (RunUntil: with the deadline as ppoll's timeout).
#pragma once

#include <poll.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "io/io_engine.h"

namespace pvdisk::io {

class ImmediateEngine : public IoEngine {
 public:
  // Refuses malformed requests with -EINVAL (see CheckRequest: a file index
  // beyond the engine's files too); otherwise calls Perform() and keeps its
  // result for the next Run().
  int Queue(const IoRequest& request) final;
  absl::Status WatchWakeFd(int fd, uint64_t tag) final;
  // Returns the kept results. With `wait` and none kept, blocks until a
  // watched eventfd fires; with nothing to wait for (no eventfd watched)
  // returns 0 at once rather than hang. Without `wait`, never blocks.
  int Run(bool wait, std::vector<IoCompletion>& out) final;
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) final;
  uint32_t inflight() const final {
    return static_cast<uint32_t>(pending_.size());
  }

 protected:
  // `file_bytes`: the size of each file the engine serves (IoRequest::file
  // indexes it). `capacity`: the most results kept at once (depth plus
  // extra I/Os), to size the list.
  ImmediateEngine(std::vector<uint64_t> file_bytes, uint32_t capacity);

  // Carries out a request that passed CheckRequest; returns the completion
  // result (the length, 0 for kFlush, or a negative errno).
  virtual int64_t Perform(const IoRequest& request) = 0;

 private:
  // Run() (deadline kNoDeadline) and RunUntil().
  int Collect(bool wait, int64_t deadline_ns, std::vector<IoCompletion>& out);
  // Polls the watched eventfds until `deadline_ns` (kNoDeadline: no limit;
  // 0: just look) and appends a wake completion for each one whose counter
  // it read. Returns how many it appended, or a negative errno.
  int PollWakeFds(int64_t deadline_ns, std::vector<IoCompletion>& out);

  const std::vector<uint64_t> file_bytes_;
  std::vector<IoCompletion> pending_;
  std::vector<pollfd> wake_fds_;
  std::vector<uint64_t> wake_tags_;  // parallel to wake_fds_
};

}  // namespace pvdisk::io
