#include "transport/process/backend_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/errno_status.h"
#include "base/event_log.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "base/thread.h"
#include "transport/process/io_fence.h"
#include "transport/process/wire.h"

namespace pvdisk::transport::process {
namespace {

// The descriptor number the backend process finds its socket at.
constexpr int kBackendSocketFd = 3;
// How long a new backend may take to set up (open the image, make its
// io_uring, register the data pools).
constexpr int kReadyTimeoutMs = 30'000;
// How long a stopping backend may take to answer what it holds.
constexpr int kStopTimeoutMs = 10'000;
// How long a killed backend may take to die before the watcher stops
// waiting for it (one stuck in an uninterruptible wait dies only when that
// ends; it is then left to be reaped by whoever inherits it).
constexpr int kKilledTimeoutMs = 2'000;
// The step of the fence wait between looks at the stop flag.
constexpr std::chrono::milliseconds kFenceStep{100};
// How long a dead backend's I/O may stay in flight before the disk fails.
constexpr std::chrono::seconds kFenceTimeout{30};
constexpr std::chrono::seconds kRestartWindow{60};

int PidfdOpen(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

BackendSupervisor::BackendSupervisor(Transport* transport,
                                     const BackendProcessOptions& options)
    : transport_(transport), options_(options), fence_byte_(NewFenceByte()) {}

absl::StatusOr<std::unique_ptr<BackendSupervisor>> BackendSupervisor::Start(
    Transport* transport, const BackendProcessOptions& options) {
  if (options.image_fds.size() > kMaxImageFiles) {
    return absl::InvalidArgumentError(
        absl::StrCat("a backend process serves an image of 0 to ",
                     kMaxImageFiles, " files, not ", options.image_fds.size()));
  }
  if (options.other_fds.size() > kMaxOtherFiles) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a backend process takes at most ", kMaxOtherFiles,
        " files besides the image, not ", options.other_fds.size()));
  }
  std::unique_ptr<BackendSupervisor> supervisor(
      new BackendSupervisor(transport, options));
  PVDISK_ASSIGN_OR_RETURN(supervisor->stop_, EventFd::Create());
  BackendSupervisor* self = supervisor.get();
  // The watcher starts every backend, the first one too: PR_SET_PDEATHSIG
  // fires when the thread that forked the backend ends, so that thread must
  // be the one that lives as long as the backend may.
  supervisor->watcher_ =
      StartThreadWithoutSignals("pvdisk-bk-watch", [self] { self->Watch(); });
  absl::Status first;
  {
    std::unique_lock<std::mutex> lock(supervisor->mu_);
    supervisor->first_cv_.wait(lock, [&] { return supervisor->first_done_; });
    first = supervisor->first_status_;
  }
  if (!first.ok()) {
    supervisor->watcher_.join();
    return first;
  }
  return supervisor;
}

BackendSupervisor::~BackendSupervisor() { Stop(); }

void BackendSupervisor::Stop(std::chrono::steady_clock::time_point deadline) {
  if (!watcher_.joinable()) return;
  stop_deadline_.store(deadline, std::memory_order_relaxed);
  stopping_.store(true, std::memory_order_release);
  stop_->Signal();
  watcher_.join();
}

pid_t BackendSupervisor::Abandon() {
  if (!watcher_.joinable()) return -1;
  abandon_.store(true, std::memory_order_relaxed);
  Stop();
  return abandoned_pid_;
}

std::string BackendSupervisor::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

std::string BackendSupervisor::engine_mode() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.engine_mode;
}

uint32_t BackendSupervisor::engine_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.engine_depth;
}

bool BackendSupervisor::fixed_buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.fixed_buffers;
}

void BackendSupervisor::SetState(const char* state) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = state;
}

void BackendSupervisor::Watch() {
  absl::Status started = Spawn();
  {
    std::lock_guard<std::mutex> lock(mu_);
    first_status_ = started;
    first_done_ = true;
    if (started.ok()) state_ = "running";
  }
  first_cv_.notify_all();
  if (!started.ok()) return;
  for (;;) {
    if (WaitForDeathOrStop()) {
      EndBackend();
      return;
    }
    std::string how = Reap();
    SetState("restarting");
    // Nothing of the dead backend may still be in flight before its
    // requests go to the ring again (or, for a backend that is not
    // restarted, before the disk says what it lost: the image is then what
    // the dead backend left).
    absl::Status fenced = WaitForFenceOrStop();
    if (stopping_.load(std::memory_order_acquire)) return;
    if (!fenced.ok()) {
      GiveUp(absl::StrCat("its backend process ", how, ", and ",
                          fenced.message()));
      break;
    }
    if (!options_.lost_on_death.empty()) {
      // What the backend held died with it: replaying its unanswered
      // requests to a new backend would serve on as if the completed,
      // unflushed writes it held had never been (see the header).
      GiveUp(absl::StrCat("its backend process ", how, ", and ",
                          options_.lost_on_death,
                          " with it: the disk lost its power (not restarted; "
                          "unmount and mount again to reboot it)"));
      break;
    }
    if (!MayRestart()) {
      GiveUp(absl::StrCat("its backend process ", how, ", the ", deaths_.size(),
                          "th time within a minute (",
                          "--backend-restart-limit ", options_.restart_limit,
                          ")"));
      break;
    }
    std::vector<std::string> queues;
    for (size_t q = 0; q < transport_->queue_count(); ++q) {
      queues.push_back(absl::StrCat(q));
    }
    LogEvent(Event::kBackendRestart, transport_->options().queue.disk,
             absl::StrJoin(queues, ","),
             absl::StrCat("the backend process of ", options_.label, " ", how,
                          "; a new one takes over its rings"));
    for (size_t q = 0; q < transport_->queue_count(); ++q) {
      transport_->queue(q).ReconnectRing();
    }
    transport_->queue(0).stats().Add(stats::Counter::backend_restarts);
    // A backend that cannot start counts as one more death.
    absl::Status spawned;
    while (!(spawned = Spawn()).ok()) {
      if (stopping_.load(std::memory_order_acquire)) return;
      LogInfo("a new backend process for %s could not start: %s",
              options_.label, spawned.message());
      if (!MayRestart()) {
        GiveUp(absl::StrCat("no new backend process could start (",
                            spawned.message(), ")"));
        break;
      }
    }
    if (!spawned.ok()) break;
    SetState("running");
  }
  // Failed for good: wait for Stop().
  while (!stopping_.load(std::memory_order_acquire)) stop_->Wait();
}

absl::Status BackendSupervisor::Spawn() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return ErrnoError(errno, "socketpair for the backend process");
  }
  // Everything the child needs is made before fork(): after it, only
  // async-signal-safe calls until exec.
  std::vector<std::string> words = {"pvdisk", "__backend", options_.label};
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const char* executable = options_.executable.c_str();
  const bool keep_stderr = options_.keep_stderr;
  const pid_t daemon = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int error = errno;
    close(pair[0]);
    close(pair[1]);
    return ErrnoError(error, "fork of the backend process");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != daemon) _exit(1);  // the daemon died meanwhile
    // A process group of its own: a Ctrl-C meant for a --foreground daemon
    // must reach the daemon only, which then stops its backend in order.
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0) _exit(126);
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    if (!keep_stderr) dup2(null_fd, STDERR_FILENO);
    if (pair[1] == kBackendSocketFd) {
      fcntl(kBackendSocketFd, F_SETFD, 0);
    } else if (dup2(pair[1], kBackendSocketFd) < 0) {
      _exit(126);
    }
    // Nothing else of the daemon's: not /dev/fuse, not the image, not the
    // other disks' regions.
    syscall(SYS_close_range, kBackendSocketFd + 1, ~0U, 0);
    if (chdir("/") != 0) _exit(126);
    execv(executable, argv.data());
    _exit(127);
  }
  close(pair[1]);
  socket_ = pair[0];
  pidfd_ = PidfdOpen(pid);
  pid_.store(pid, std::memory_order_relaxed);
  if (pidfd_ < 0) {
    int error = errno;
    EndBackend();
    return ErrnoError(error, "pidfd_open of the backend process");
  }
  absl::Status attached = Attach();
  if (!attached.ok()) {
    EndBackend();
    return attached;
  }
  return absl::OkStatus();
}

absl::Status BackendSupervisor::Attach() {
  const TransportOptions& options = transport_->options();
  BackendSetup setup;
  setup.queue = options.queue;
  setup.queues = static_cast<uint32_t>(transport_->queue_count());
  setup.backend_threads = options.backend_threads;
  setup.backend = options.backend;
  setup.engine_config = options_.engine_config;
  setup.fence_byte = fence_byte_;
  setup.image_files = static_cast<uint32_t>(options_.image_fds.size());
  setup.other_files = static_cast<uint32_t>(options_.other_fds.size());
  setup.log_target = InheritedLogTarget();
  std::vector<int> files = options_.image_fds;
  files.insert(files.end(), options_.other_fds.begin(),
               options_.other_fds.end());
  PVDISK_RETURN_IF_ERROR(SendPacket(socket_, EncodeSetup(setup), files));
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    Queue& queue = transport_->queue(q);
    std::vector<int> fds(kQueueFdCount);
    fds[kRegionFd] = queue.region().fd();
    fds[kStatsFd] = queue.shared_stats().fd();
    fds[kKickFd] = queue.kick().fd();
    fds[kIrqFd] = queue.irq().fd();
    PVDISK_RETURN_IF_ERROR(SendPacket(socket_, absl::StrCat("queue ", q), fds));
  }
  // The answer, unless Stop() comes first: a shutdown must not wait for a
  // backend that is slow to start.
  pollfd watched[2] = {{socket_, POLLIN, 0}, {stop_->fd(), POLLIN, 0}};
  while (poll(watched, 2, kReadyTimeoutMs) < 0 && errno == EINTR) {
  }
  if (stopping_.load(std::memory_order_acquire)) {
    return absl::CancelledError("the daemon is shutting down");
  }
  absl::StatusOr<Packet> answer = ReceivePacket(socket_, 0);
  if (!answer.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the backend process did not start: ", answer.status().message()));
  }
  CloseFds(*answer);
  PVDISK_ASSIGN_OR_RETURN(BackendReady ready, DecodeReady(answer->payload));
  if (!ready.ok) return absl::FailedPreconditionError(ready.error);
  const int control = fcntl(socket_, F_DUPFD_CLOEXEC, 0);
  if (control < 0) return ErrnoError(errno, "dup of the backend's socket");
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = ready;
  control_fd_ = control;
  return absl::OkStatus();
}

bool BackendSupervisor::WaitForDeathOrStop() {
  pollfd watched[2] = {{pidfd_, POLLIN, 0}, {stop_->fd(), POLLIN, 0}};
  for (;;) {
    if (stopping_.load(std::memory_order_acquire)) return true;
    int ready = poll(watched, 2, -1);
    if (ready < 0 && errno != EINTR) return true;
    if (watched[0].revents != 0) return false;
    if (watched[1].revents != 0) stop_->Wait();
  }
}

void BackendSupervisor::CloseControl() {
  std::lock_guard<std::mutex> lock(mu_);
  if (control_fd_ >= 0) close(control_fd_);
  control_fd_ = -1;
}

absl::StatusOr<std::string> BackendSupervisor::Control(
    std::string_view request, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> one_at_a_time(control_mu_);
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (control_fd_ < 0) {
      return absl::UnavailableError(
          absl::StrCat("the backend process of ", options_.label, " is ",
                       state_ == "running" ? "stopping" : state_));
    }
    // A duplicate of our own: the watcher may close control_fd_ meanwhile.
    fd = fcntl(control_fd_, F_DUPFD_CLOEXEC, 0);
  }
  if (fd < 0) return ErrnoError(errno, "dup of the backend's socket");
  struct Closed {
    int fd;
    ~Closed() { close(fd); }
  } closed{fd};
  const uint64_t seq = ++control_seq_;
  if (!SendPacket(fd, EncodeControl({seq, std::string(request)}), {}).ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the backend process of ", options_.label, " is gone (", state(), ")"));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    absl::StatusOr<Packet> packet =
        ReceivePacket(fd, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (!packet.ok()) {
      if (absl::IsDeadlineExceeded(packet.status())) {
        return absl::DeadlineExceededError(
            absl::StrCat("the backend process of ", options_.label,
                         " did not answer within ", timeout.count(), " ms"));
      }
      return absl::UnavailableError(
          absl::StrCat("the backend process of ", options_.label,
                       " died before it answered (", state(), ")"));
    }
    CloseFds(*packet);
    PVDISK_ASSIGN_OR_RETURN(ControlMessage answer,
                            DecodeControl(packet->payload));
    // An older request's late answer: not ours.
    if (answer.seq == seq) return answer.body;
  }
}

std::string BackendSupervisor::Reap() {
  CloseControl();
  pid_t pid = pid_.load(std::memory_order_relaxed);
  int status = 0;
  std::string how = "ended";
  if (waitpid(pid, &status, 0) == pid) {
    if (WIFSIGNALED(status)) {
      how = absl::StrCat("(pid ", pid, ") was killed by signal ",
                         WTERMSIG(status));
    } else if (WIFEXITED(status)) {
      how = absl::StrCat("(pid ", pid, ") exited with status ",
                         WEXITSTATUS(status));
    }
  }
  close(pidfd_);
  pidfd_ = -1;
  close(socket_);
  socket_ = -1;
  pid_.store(-1, std::memory_order_relaxed);
  return how;
}

void BackendSupervisor::EndBackend() {
  const pid_t pid = pid_.load(std::memory_order_relaxed);
  if (pid < 0) return;
  // The backend stops when every open of the daemon's end is closed.
  CloseControl();
  // A closed socket tells the backend to stop once its rings are idle.
  close(socket_);
  socket_ = -1;
  const bool abandon = abandon_.load(std::memory_order_relaxed);
  int wait_ms = abandon ? 0 : kStopTimeoutMs;
  const auto stop_deadline = stop_deadline_.load(std::memory_order_relaxed);
  if (stop_deadline != std::chrono::steady_clock::time_point::max()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        stop_deadline - std::chrono::steady_clock::now());
    wait_ms = static_cast<int>(
        std::clamp<int64_t>(left.count(), 0, int64_t{wait_ms}));
  }
  auto ended_within = [this](int ms) {
    if (pidfd_ < 0) return false;
    pollfd watched{pidfd_, POLLIN, 0};
    return poll(&watched, 1, ms) > 0;
  };
  bool ended = ended_within(wait_ms);
  if (!ended) {
    if (abandon) {
      abandoned_pid_ = pid;
    } else {
      LogInfo("backend process of %s did not stop in time; killing it",
              options_.label);
    }
    kill(pid, SIGKILL);
    ended = ended_within(kKilledTimeoutMs);
  }
  if (!ended) {
    // Still in an uninterruptible wait: not reaped here (waitpid would
    // wait as long); it dies when that wait ends.
    LogInfo("backend process of %s (pid %d) was killed but has not ended",
            options_.label, pid);
    close(pidfd_);
    pidfd_ = -1;
    pid_.store(-1, std::memory_order_relaxed);
    return;
  }
  Reap();
}

absl::Status BackendSupervisor::WaitForFenceOrStop() {
  // An image without files fences a dead backend's writes itself (RBD:
  // librbd's exclusive lock, see BackendProcessOptions::image_fds).
  if (options_.image_fds.empty()) {
    if (!options_.fence_dead_writer) return absl::OkStatus();
    std::string writer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writer = ready_.writer;
    }
    return options_.fence_dead_writer(writer);
  }
  auto deadline = std::chrono::steady_clock::now() + kFenceTimeout;
  for (;;) {
    absl::Status fenced =
        WaitForFence(options_.image_fds[0], fence_byte_, kFenceStep);
    if (fenced.ok() || !absl::IsDeadlineExceeded(fenced) ||
        stopping_.load(std::memory_order_acquire) ||
        std::chrono::steady_clock::now() >= deadline) {
      return fenced;
    }
  }
}

bool BackendSupervisor::MayRestart() {
  auto now = std::chrono::steady_clock::now();
  deaths_.push_back(now);
  while (!deaths_.empty() && now - deaths_.front() > kRestartWindow) {
    deaths_.pop_front();
  }
  return deaths_.size() <= options_.restart_limit;
}

void BackendSupervisor::GiveUp(const std::string& why) {
  LogInfo("disk %s fails its I/O with EIO from now on: %s", options_.label,
          why);
  SetState("failed");
  for (size_t q = 0; q < transport_->queue_count(); ++q) {
    transport_->queue(q).frontend().OnRingStopped();
  }
}

}  // namespace pvdisk::transport::process
