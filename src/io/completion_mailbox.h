// CompletionMailbox: finished requests handed from other threads (a
// library's completion callbacks: librbd's, for the rbd engine) to the one
// thread that owns them, with an eventfd that tells that thread to look.
//
// The eventfd is written at most once per batch: only by the Put() that
// finds the mailbox not signalled since the owner last emptied it. The
// owner clears the eventfd's counter (ClearSignal) before it empties the
// mailbox (TakeAll), so an item put after the take signals again and is
// never left unseen, and items put between the two ride along with the
// take without a write of their own.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pvdisk::io {

template <typename T>
class CompletionMailbox {
 public:
  CompletionMailbox() = default;
  ~CompletionMailbox() {
    if (fd_ >= 0) close(fd_);
  }
  CompletionMailbox(const CompletionMailbox&) = delete;
  CompletionMailbox& operator=(const CompletionMailbox&) = delete;

  // Makes the eventfd (non-blocking). Call once, before anything else.
  absl::Status Init() {
    fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0) {
      return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
    }
    return absl::OkStatus();
  }

  // The eventfd the owner polls: readable once something was put since
  // the owner's last ClearSignal().
  int fd() const { return fd_; }

  // Any thread: adds `item`, and writes the eventfd unless it was written
  // since the owner last emptied the mailbox. Returns whether it wrote.
  bool Put(T item) {
    bool signal;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back(item);
      has_items_.store(true, std::memory_order_release);
      signal = !signalled_;
      signalled_ = true;
    }
    if (signal) {
      uint64_t one = 1;
      while (write(fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
      }
    }
    return signal;
  }

  // The owner, after its poll of fd() fired: clears the counter (before
  // TakeAll, see the top). Returns whether it was set.
  bool ClearSignal() {
    uint64_t counter;
    return read(fd_, &counter, sizeof(counter)) == sizeof(counter);
  }

  // The owner: appends everything put so far to `out`, in the order put;
  // false (and no lock taken) when the mailbox is empty.
  bool TakeAll(std::vector<T>& out) {
    if (!has_items_.load(std::memory_order_acquire)) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    out.insert(out.end(), items_.begin(), items_.end());
    items_.clear();
    has_items_.store(false, std::memory_order_relaxed);
    signalled_ = false;
    return true;
  }

 private:
  int fd_ = -1;
  std::mutex mutex_;
  std::vector<T> items_;    // under mutex_
  bool signalled_ = false;  // under mutex_: written since the last take
  std::atomic<bool> has_items_{false};
};

}  // namespace pvdisk::io
