// BackendSupervisor: the daemon's side of --backend process. It runs one
// disk's backend in a child process (fork, then exec of the pvdisk binary as
// `pvdisk __backend`, see backend_host.h), hands it the image file(s) and
// each queue's memfd, counters and eventfds over a unix socket, and watches
// it through a pidfd.
//
// Recovery: when the backend process dies (any signal or exit), the watcher
// (1) reaps it, (2) waits for the I/O fence (io_fence.h) so that none of its
// I/O is still in flight, (3) has every queue's frontend re-initialise its
// ring and write again every request the backend had not answered
// (Queue::ReconnectRing), and (4) starts a new backend process, which
// attaches to the rings like a first one (`backend_restarts`). Applications
// only see a pause. Requests the dead backend had done but not answered run
// twice, which a block device allows (see docs/design.md).
//
// A backend that dies more than `restart_limit` times within a minute is
// not restarted again: the disk's pending and later requests fail with EIO,
// stderr says so and the stats header shows backend_state=failed.
//
// A backend that holds what dies with it (BackendProcessOptions::
// lost_on_death: a volatile write cache, a write log's tail) is never
// restarted: its first death fails the disk the same way, once the dead
// backend's I/O is fenced (its write-out under way has landed or never
// will), with one line saying what was lost.
//
// Control requests (Control()) go over the same socket once a backend
// serves, one at a time; without a running backend they fail at once.
//
// Shutdown: Stop() once the transport has drained; Abandon() when it did
// not within --shutdown-timeout (the backend is killed at once). A restart
// under way (the fence wait, a new backend's setup) ends on either.
//
// The backend never outlives the daemon: it is killed when the thread that
// started it (the watcher, alive as long as the supervisor) ends
// (PR_SET_PDEATHSIG), and it stops by itself when the socket closes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/event_fd.h"
#include "transport/process/backend_setup.h"
#include "transport/transport.h"

namespace pvdisk::transport::process {

inline constexpr uint32_t kDefaultRestartLimit = 5;

struct BackendProcessOptions {
  // The pvdisk binary to exec; /proc/self/exe is the running daemon's own
  // binary, even if the file was replaced since.
  std::string executable = "/proc/self/exe";
  // Shown in the backend's command line (e.g. the image path).
  std::string label;
  // Deaths tolerated within a minute before the disk fails.
  uint32_t restart_limit = kDefaultRestartLimit;
  // The daemon's own opens of the files the disk is made of, in the order
  // of BackendSetup::image_files; they stay the daemon's and must outlive
  // the supervisor. Every backend, the first and each restarted one, gets
  // them over its socket and does its I/O to these very files, so that
  // renaming, removing or replacing an image's path while the disk is
  // mounted changes nothing. The I/O fence is tested on the first one.
  // Empty for an image the backend opens itself and that fences a dead
  // backend's writes on its own (an RBD image with librbd's exclusive lock,
  // which a successor takes only by blocklisting the dead owner): no file
  // fence is waited for then.
  std::vector<int> image_fds;
  // For an image without files, which fences a dead backend's writes
  // itself: called with the dead backend's BackendReady::writer after its
  // death, before its requests go to a new backend. An RBD image breaks
  // the dead client's exclusive lock there, which blocklists it at the
  // cluster: its successor then need not wait for the cluster to notice the
  // death (the dead client's watch times out after 30 s). An error stops
  // the restarts (the disk fails).
  std::function<absl::Status(const std::string& writer)> fence_dead_writer;
  // Passed to the backend's EngineFactoryMaker (BackendSetup::engine_config).
  std::string engine_config;
  // The other files of the disk (BackendSetup::other_files: its write
  // log), the daemon's opens, sent after the image's; they must outlive
  // the supervisor.
  std::vector<int> other_fds;
  // Empty: a dead backend is restarted (its unanswered requests are sent
  // again). Else what the backend held that died with it ("its volatile
  // write cache"): a death is final for the disk (see above), and the log
  // line names this.
  std::string lost_on_death;
  // Whether the backend writes its messages to the daemon's stderr. A
  // daemon that detaches from its terminal once mounted must not leave that
  // terminal (or the pipe of whoever ran `pvdisk mount`) open in its
  // backends: then they write to /dev/null, like the daemon. Their stdin
  // and stdout are /dev/null always.
  bool keep_stderr = true;
};

class BackendSupervisor {
 public:
  // Starts the backend process for `transport`'s queues (made with
  // backend_elsewhere) and returns once it serves them, or with the reason
  // it could not (e.g. the image could not be opened there).
  static absl::StatusOr<std::unique_ptr<BackendSupervisor>> Start(
      Transport* transport, const BackendProcessOptions& options);
  ~BackendSupervisor();
  BackendSupervisor(const BackendSupervisor&) = delete;
  BackendSupervisor& operator=(const BackendSupervisor&) = delete;

  // Ends the backend process (it answers what it took first) and the
  // watcher. Call once the transport has drained. A backend that has not
  // ended by `deadline` (and at most 10 s after the call) is killed.
  // Idempotent.
  void Stop(std::chrono::steady_clock::time_point deadline =
                std::chrono::steady_clock::time_point::max());

  // Shutdown gives up on the backend: it is killed (SIGKILL) at once, even
  // if it is stopped or hung, and the watcher ends, whatever it was doing
  // (a restart included). Returns the pid it killed, or -1 if none ran.
  // The caller then fails the transport's I/O (Transport::Abandon).
  // Idempotent; Stop() afterwards does nothing.
  pid_t Abandon();

  // Sends `request` to the running backend (its BackendEngines::control)
  // and returns its answer. Any thread; one request at a time. Unavailable
  // (naming the disk and the backend's state) when no backend serves (it
  // is starting, restarting, dead for good or stopped) or when it dies
  // before answering; DeadlineExceeded when it does not answer within
  // `timeout` (a stopped or hung backend): never waits longer.
  absl::StatusOr<std::string> Control(std::string_view request,
                                      std::chrono::milliseconds timeout);

  // For the stats header. Any thread.
  pid_t backend_pid() const { return pid_.load(std::memory_order_relaxed); }
  // "running", "restarting" or "failed".
  std::string state() const;
  std::string engine_mode() const;
  uint32_t engine_depth() const;
  bool fixed_buffers() const;
  uint32_t restart_limit() const { return options_.restart_limit; }

 private:
  BackendSupervisor(Transport* transport, const BackendProcessOptions& options);

  // The watcher thread: starts the first backend (reporting the outcome to
  // Start()), then restarts it whenever it dies until Stop() or the limit.
  void Watch();
  // Starts a backend process and waits until it serves the rings. On
  // failure nothing of it is left.
  absl::Status Spawn();
  // Sends the setup and the queues' descriptors, and waits for the answer.
  absl::Status Attach();
  // Waits for the backend to die or for Stop(); true if Stop() was asked.
  bool WaitForDeathOrStop();
  // Closes control_fd_: Control() fails from now on.
  void CloseControl();
  // Reaps the backend; returns how it ended, for the log.
  std::string Reap();
  // Closes the socket, gives the backend time to stop cleanly (none when
  // abandoning), kills it otherwise, and reaps it.
  void EndBackend();
  // Waits for the dead backend's I/O fence (io_fence.h), in short steps so
  // that Stop() ends the wait.
  absl::Status WaitForFenceOrStop();
  // Records a death now; false if that makes more than restart_limit within
  // a minute.
  bool MayRestart();
  // Fails every queue's pending and later I/O with EIO.
  void GiveUp(const std::string& why);
  void SetState(const char* state);

  Transport* const transport_;
  const BackendProcessOptions options_;
  const uint64_t fence_byte_;
  std::unique_ptr<EventFd> stop_;
  std::atomic<bool> stopping_{false};
  // Set before stopping_ (and read after it): Abandon() asked, and when
  // Stop() wants the backend gone at the latest.
  std::atomic<bool> abandon_{false};
  std::atomic<std::chrono::steady_clock::time_point> stop_deadline_{
      std::chrono::steady_clock::time_point::max()};
  // The backend Abandon() killed, for its caller's report.
  pid_t abandoned_pid_ = -1;
  std::thread watcher_;

  // The current backend process (watcher thread only, but pid_ any thread).
  std::atomic<pid_t> pid_{-1};
  int pidfd_ = -1;
  int socket_ = -1;
  std::deque<std::chrono::steady_clock::time_point> deaths_;

  // One control request at a time (Control()); taken before mu_.
  std::mutex control_mu_;
  mutable std::mutex mu_;
  // A duplicate of socket_ while a backend serves, for Control(); -1
  // otherwise. Guarded by mu_: set once a backend is ready, closed when it
  // is reaped or ended.
  int control_fd_ = -1;
  uint64_t control_seq_ = 0;  // the last request's; guarded by control_mu_
  // Guarded by mu_.
  std::string state_ = "starting";
  BackendReady ready_;
  bool first_done_ = false;
  absl::Status first_status_;
  std::condition_variable first_cv_;
};

}  // namespace pvdisk::transport::process
