// ClassicChannel: FUSE requests read from /dev/fuse by worker threads.
//
// Each worker reads its own clone of the connection's fd (FUSE_DEV_IOC_CLONE:
// one shared kernel queue, but a processing list and lock per fd), hands the
// request to the Session, and goes back to read() at once: handlers never
// wait for I/O. A reply is one writev() on the fd its request came from
// (the kernel finds the request only in that fd's processing list), from
// whichever thread answers it.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "fuse/protocol/reply.h"
#include "fuse/protocol/session.h"

namespace pvdisk::fuse::channel {

class ClassicChannel final : public protocol::ReplySink {
 public:
  // `fd`: the connection's /dev/fuse fd, not owned, open until Close().
  // `threads` workers; `on_ended` runs once (on a worker) if the connection
  // ends under us (unmounted from outside, or aborted).
  ClassicChannel(int fd, protocol::Session* session, unsigned threads,
                 std::function<void()> on_ended);
  ~ClassicChannel() override;
  ClassicChannel(const ClassicChannel&) = delete;
  ClassicChannel& operator=(const ClassicChannel&) = delete;

  // Opens the clones and starts the workers.
  absl::Status Start();
  // Stops the workers; requests not yet read stay with the kernel. The fds
  // stay open so that requests in flight can still be answered.
  void StopReading();
  // Closes the clone fds. REQUIRES: StopReading() returned and every
  // request read has been answered.
  void Close();

  void Send(uint64_t slot, uint64_t unique, int error,
            std::span<const iovec> payload) override;

 private:
  struct Worker {
    int fd = -1;
    bool owns_fd = false;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void Run(Worker* worker);

  const int fd_;
  protocol::Session* const session_;
  const unsigned thread_count_;
  std::function<void()> on_ended_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Worker>> workers_;
};

// Sends `payload` as the reply to `unique` with one writev() on `fd`.
// Shared by every channel that answers through /dev/fuse.
void WriteReply(int fd, uint64_t unique, int error,
                std::span<const iovec> payload);

// Interrupting a thread blocked in a system call: the signal pvdisk's FUSE
// threads leave unblocked, with a handler that does nothing (installed
// without SA_RESTART, so the call returns EINTR).
int WakeSignal();
void InstallWakeHandler();
// Unblocks WakeSignal() in the calling thread (threads start with all
// signals blocked, see base/thread.h).
void AcceptWakeSignal();
// Sets `stop` semantics aside, interrupts `thread` until `done` is true,
// then joins it.
void InterruptAndJoin(std::thread& thread, const std::atomic<bool>& done);

}  // namespace pvdisk::fuse::channel
