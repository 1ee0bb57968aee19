#include "fuse/channel/server.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/errno_status.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "fuse/channel/classic_channel.h"
#include "fuse/channel/kernel_mount.h"
#include "fuse/channel/uring_channel.h"
#include "transport/event_fd.h"

namespace pvdisk::fuse::channel {
namespace {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread for its lifetime
// and delivers them through a signalfd instead.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    sigaddset(&signals_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals_, &previous_);
    fd_ = signalfd(-1, &signals_, SFD_CLOEXEC);
  }
  ~StopSignals() {
    if (fd_ >= 0) close(fd_);
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  int fd() const { return fd_; }

 private:
  sigset_t signals_;
  sigset_t previous_;
  int fd_ = -1;
};

// Sleeps until a stop signal arrives or `ended` is signalled.
void WaitForStop(int signal_fd, int ended_fd) {
  pollfd watched[2] = {{signal_fd, POLLIN, 0}, {ended_fd, POLLIN, 0}};
  while (poll(watched, 2, -1) < 0 && errno == EINTR) {
  }
  if (watched[0].revents & POLLIN) {
    // Take the signal, or it would still be pending (and kill us) when the
    // mask is restored.
    signalfd_siginfo info;
    (void)!read(signal_fd, &info, sizeof(info));
  }
}

}  // namespace

absl::Status Serve(const ServeOptions& options, protocol::Handler* handler,
                   const ServeHooks& hooks) {
  signal(SIGPIPE, SIG_IGN);
  StopSignals stop_signals;
  if (stop_signals.fd() < 0) return ErrnoError(errno, "signalfd");
  PVDISK_ASSIGN_OR_RETURN(std::unique_ptr<transport::EventFd> ended,
                          transport::EventFd::Create());
  const bool uring = options.channel.fuse_io == FuseIo::kUring;
  protocol::SessionOptions session_options = options.session;
  session_options.want_uring = uring;
  protocol::Session session(handler, session_options);
  PVDISK_ASSIGN_OR_RETURN(
      std::unique_ptr<KernelMount> mount,
      KernelMount::Mount(options.mountpoint, options.mount_options));
  std::unique_ptr<UringChannel> ring;
  if (uring) {
    ring = std::make_unique<UringChannel>(
        mount->fd(), &session, options.channel, session_options.max_write,
        options.companions);
    if (absl::Status started = ring->Start(); !started.ok()) {
      mount->Unmount();
      return started;
    }
    // The queues can register only once the kernel has our INIT reply.
    session.OnInitialized([&session, &ring] {
      if (session.negotiated().uring()) {
        ring->Register();
      } else {
        LogInfo(
            "the kernel did not take FUSE over io_uring at INIT; serving "
            "through /dev/fuse with one reader");
        ring->RunWithoutFuse();  // for their companions
      }
    });
  }
  ClassicChannel classic(mount->fd(), &session,
                         uring ? 1 : options.channel.classic_threads,
                         [&ended] { ended->Signal(); });
  if (absl::Status started = classic.Start(); !started.ok()) {
    if (ring) ring->Stop();
    mount->Unmount();
    return started;
  }
  if (hooks.on_mounted) hooks.on_mounted();

  WaitForStop(stop_signals.fd(), ended->fd());

  classic.StopReading();
  if (ring) ring->StopTaking();
  if (hooks.drain) hooks.drain();
  if (ring) ring->Stop();
  classic.Close();
  mount->Unmount();
  return absl::OkStatus();
}

}  // namespace pvdisk::fuse::channel
