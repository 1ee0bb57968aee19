// QueueCommits: the replies one FUSE uring queue thread has to commit on
// its ring, and the requests it holds. Replies come from its own thread
// (local), from other threads (remote: a backend or completion thread that
// answered a request), and from other queue threads that hand it an entry
// to commit and hold from then on (moved in: spreading, spread_policy.h).
// The commit router (commit_router.h) fills and empties them.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace pvdisk::fuse::channel {

class QueueCommits {
 public:
  // Owner thread only. Commits as EntryTag (uring_entry.h).
  std::vector<uint64_t>& local() { return local_; }
  uint32_t with_handler() const { return with_handler_; }
  uint32_t held_units() const { return held_units_; }
  // A request of this weight is now held here (taken, or moved in).
  void Hold(uint32_t spread_units) {
    ++with_handler_;
    held_units_ += spread_units;
  }
  // A request of this weight is no longer held here (committed or handed
  // on). The caller reads the weight while the entry is still its own: once
  // handed on, another thread may take the entry's next request at once.
  void Release(uint32_t spread_units) {
    --with_handler_;
    held_units_ -= spread_units;
  }

  // Any thread: a reply made on another thread, for the owner to commit.
  void AddRemote(uint64_t tag) {
    std::lock_guard<std::mutex> lock(mu_);
    remote_.push_back(tag);
  }
  // Any thread: hands an entry over for the owner to commit and hold; false
  // once the owner has closed (it is about to exit).
  bool MoveIn(uint64_t tag) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    moved_in_.push_back(tag);
    return true;
  }
  // Owner thread: appends the remote commits to the local ones.
  void TakeRemote() {
    taken_.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      taken_.swap(remote_);
    }
    local_.insert(local_.end(), taken_.begin(), taken_.end());
  }
  // Owner thread: appends the entries moved in to the local commits and
  // holds them (`weight(tag)`: what each weighs); with `close`, refuses
  // further ones.
  template <typename Weight>
  void TakeMovedIn(bool close, Weight weight) {
    taken_.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      taken_.swap(moved_in_);
      if (close) closed_ = true;
    }
    for (uint64_t tag : taken_) Hold(weight(tag));
    local_.insert(local_.end(), taken_.begin(), taken_.end());
  }

 private:
  std::vector<uint64_t> local_;
  std::vector<uint64_t> taken_;  // the swap's other side (keeps capacity)
  uint32_t with_handler_ = 0;    // entries handed out, not yet committed
  uint32_t held_units_ = 0;      // what their requests weigh

  std::mutex mu_;
  std::vector<uint64_t> remote_;    // guarded by mu_
  std::vector<uint64_t> moved_in_;  // guarded by mu_
  bool closed_ = false;             // guarded by mu_
};

}  // namespace pvdisk::fuse::channel
