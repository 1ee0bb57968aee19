// Starting pvdisk's own threads. They never take process signals: SIGINT and
// SIGTERM must reach the thread that serves the mount (it takes them through
// a signalfd, see fuse/channel/server.h), so every other thread is created
// with all signals blocked; a thread that needs one unblocks it itself.
// Each gets a name (at most 15 characters) that top, ps -L and perf show.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace pvdisk {

// Blocks every signal in the calling thread for its lifetime, so that the
// threads created meanwhile, also by libraries (librados), start with all
// signals blocked.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous_);
  }
  ~AllSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

template <typename Function>
std::thread StartThreadWithoutSignals(const char* name, Function&& function) {
  std::thread thread = [&] {
    AllSignalsBlocked blocked;
    return std::thread(std::forward<Function>(function));
  }();
  pthread_setname_np(thread.native_handle(), name);
  return thread;
}

}  // namespace pvdisk
