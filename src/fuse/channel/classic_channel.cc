#include "fuse/channel/classic_channel.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/thread.h"
#include "fuse/protocol/abi.h"

namespace pvdisk::fuse::channel {
namespace {

void IgnoreSignal(int) {}

// Room for the largest request: a WRITE of max_write bytes after its
// headers.
constexpr size_t kBufferBytes = protocol::kMaxWrite + 4096;

}  // namespace

int WakeSignal() { return SIGUSR1; }

void InstallWakeHandler() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = IgnoreSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocked read() returns EINTR
  sigaction(WakeSignal(), &action, nullptr);
}

void AcceptWakeSignal() {
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, WakeSignal());
  pthread_sigmask(SIG_UNBLOCK, &wake, nullptr);
}

void InterruptAndJoin(std::thread& thread, const std::atomic<bool>& done) {
  if (!thread.joinable()) return;
  // The signal may land just before the thread enters its blocking call;
  // then the next one gets it.
  while (!done.load(std::memory_order_acquire)) {
    pthread_kill(thread.native_handle(), WakeSignal());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  thread.join();
}

void WriteReply(int fd, uint64_t unique, int error,
                std::span<const iovec> payload) {
  abi::fuse_out_header header{};
  size_t length = sizeof(header);
  absl::InlinedVector<iovec, 8> iov;
  iov.push_back(iovec{&header, sizeof(header)});
  for (const iovec& piece : payload) {
    if (piece.iov_len == 0) continue;
    iov.push_back(piece);
    length += piece.iov_len;
  }
  header.len = static_cast<uint32_t>(length);
  header.error = -error;
  header.unique = unique;
  ssize_t written;
  do {
    written = writev(fd, iov.data(), static_cast<int>(iov.size()));
  } while (written < 0 && errno == EINTR);
  // ENOENT: the request was interrupted or aborted and the kernel dropped
  // it; ENODEV: the connection is gone. Neither is the server's fault.
  if (written < 0 && errno != ENOENT && errno != ENODEV) {
    LogInfo("writing a FUSE reply failed: %s", strerror(errno));
  }
}

ClassicChannel::ClassicChannel(int fd, protocol::Session* session,
                               unsigned threads, std::function<void()> on_ended)
    : fd_(fd),
      session_(session),
      thread_count_(threads == 0 ? 1 : threads),
      on_ended_(std::move(on_ended)) {}

ClassicChannel::~ClassicChannel() {
  StopReading();
  Close();
}

absl::Status ClassicChannel::Start() {
  InstallWakeHandler();
  for (unsigned i = 0; i < thread_count_; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->fd = fd_;
    if (i > 0) {
      int clone = open("/dev/fuse", O_RDWR | O_CLOEXEC);
      uint32_t master = static_cast<uint32_t>(fd_);
      if (clone >= 0 && ioctl(clone, abi::kDevIocClone, &master) == 0) {
        worker->fd = clone;
        worker->owns_fd = true;
      } else if (clone >= 0) {
        close(clone);  // several readers of one fd work too, just slower
      }
    }
    workers_.push_back(std::move(worker));
  }
  for (auto& worker : workers_) {
    Worker* w = worker.get();
    w->thread = StartThreadWithoutSignals("pvdisk-fuse", [this, w] { Run(w); });
  }
  return absl::OkStatus();
}

void ClassicChannel::StopReading() {
  stop_.store(true, std::memory_order_release);
  for (auto& worker : workers_) InterruptAndJoin(worker->thread, worker->done);
}

void ClassicChannel::Close() {
  for (auto& worker : workers_) {
    if (worker->owns_fd && worker->fd >= 0) close(worker->fd);
    worker->fd = -1;
  }
}

void ClassicChannel::Send(uint64_t slot, uint64_t unique, int error,
                          std::span<const iovec> payload) {
  WriteReply(static_cast<int>(slot), unique, error, payload);
}

void ClassicChannel::Run(Worker* worker) {
  AcceptWakeSignal();
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[kBufferBytes]);
  while (!stop_.load(std::memory_order_acquire)) {
    ssize_t got = read(worker->fd, buffer.get(), kBufferBytes);
    if (got < 0) {
      // EINTR: woken to stop (or any signal); ENOENT: the request was
      // interrupted before we got it; EAGAIN: spurious.
      if (errno == EINTR || errno == ENOENT || errno == EAGAIN) continue;
      if (errno != ENODEV) {
        LogInfo("reading /dev/fuse failed: %s", strerror(errno));
      }
      // ENODEV: unmounted, the connection is over.
      if (!ended_.exchange(true) && on_ended_) on_ended_();
      break;
    }
    session_->ProcessClassic(
        std::span<const uint8_t>(buffer.get(), static_cast<size_t>(got)), this,
        static_cast<uint64_t>(worker->fd));
  }
  worker->done.store(true, std::memory_order_release);
}

}  // namespace pvdisk::fuse::channel
