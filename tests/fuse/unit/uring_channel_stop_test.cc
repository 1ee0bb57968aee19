// UringChannel::StopTaking on a real FUSE mount with FUSE over io_uring: it
// returns only once no queue thread can still hand the Session a request.
//
// Why: shutdown waits for the disks' operations in flight right after
// StopTaking. A queue thread that had read the stop flag as unset just
// before it was set, and was then preempted before its request reached the
// disk, submitted that request after the drain had found nothing in flight,
// to stopped queues: never answered, and the unmount hung (seen in CI, four
// tests at a time on two CPUs). Here a handler that blocks inside the
// Session stands for that preempted thread.
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "fuse/channel/classic_channel.h"
#include "fuse/channel/kernel_mount.h"
#include "fuse/channel/uring_channel.h"
#include "fuse/channel/uring_support.h"
#include "fuse/protocol/handler.h"
#include "fuse/protocol/reply.h"
#include "fuse/protocol/session.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse::channel {
namespace {

using namespace std::chrono_literals;

bool OnQueueThread() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return std::strncmp(name, "pvdisk-fuse-q", 13) == 0;
}

// Serves GETATTR of the root (a directory, attributes never cached, so
// every stat() asks). Once armed, the next GETATTR that comes through a
// queue thread blocks in the handler until Release().
class BlockingRootHandler : public protocol::Handler {
 public:
  void Getattr(const protocol::Request&, protocol::Reply reply) override {
    const bool on_queue = OnQueueThread();
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++getattrs_;
      if (on_queue) ++on_queue_threads_;
      if (on_queue && armed_) {
        armed_ = false;
        blocked_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return released_; });
      }
    }
    struct stat st {};
    st.st_ino = 1;
    st.st_mode = S_IFDIR | 0755;
    st.st_nlink = 2;
    reply.Struct(protocol::AttrOut(st, 0.0));
  }

  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  bool WaitBlocked(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return blocked_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int getattrs() {
    std::lock_guard<std::mutex> lock(mu_);
    return getattrs_;
  }
  int on_queue_threads() {
    std::lock_guard<std::mutex> lock(mu_);
    return on_queue_threads_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int getattrs_ = 0;
  int on_queue_threads_ = 0;
  bool armed_ = false;
  bool blocked_ = false;
  bool released_ = false;
};

int StatErrno(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? 0 : errno;
}

// A mount served by a UringChannel (and the classic reader INIT needs).
// TearDown unblocks the handler and takes everything down in Serve's
// order before the futures (stat calls the kernel ends at unmount) go.
class UringChannelStopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/dev/fuse", R_OK | W_OK) != 0) {
      GTEST_SKIP() << "no usable /dev/fuse here";
    }
    UringSupport support = CheckUringSupport(/*may_turn_on=*/true);
    if (!support.available) {
      GTEST_SKIP() << "no FUSE over io_uring here: " << support.why_not;
    }
    char dir_template[] = "/tmp/pvdisk_uring_stop.XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr) << std::strerror(errno);
    mountpoint_ = dir_template;
    protocol::SessionOptions options;
    options.want_uring = true;
    session_ = std::make_unique<protocol::Session>(&handler_, options);
    auto mounted = KernelMount::Mount(mountpoint_, "fsname=pvdisk-stop-test");
    ASSERT_TRUE(mounted.ok()) << mounted.status();
    mount_ = std::move(*mounted);
    ChannelOptions channel;
    channel.fuse_io = FuseIo::kUring;
    channel.queue_depth = 4;
    ring_ = std::make_unique<UringChannel>(mount_->fd(), session_.get(),
                                           channel, options.max_write);
    ASSERT_TRUE(ring_->Start().ok());
    session_->OnInitialized([this] {
      if (session_->negotiated().uring()) {
        ring_->Register();
      } else {
        ring_->RunWithoutFuse();
      }
    });
    classic_ = std::make_unique<ClassicChannel>(mount_->fd(), session_.get(), 1,
                                                [] {});
    ASSERT_TRUE(classic_->Start().ok());
  }

  void TearDown() override {
    handler_.Release();
    if (classic_) classic_->StopReading();
    if (ring_) ring_->Stop();
    if (classic_) classic_->Close();
    if (mount_) mount_->Unmount();
    if (!mountpoint_.empty()) rmdir(mountpoint_.c_str());
  }

  // Stats the root until a GETATTR comes through a queue thread: the kernel
  // moves to the ring once every queue has registered.
  bool WaitForTheRing() {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (handler_.on_queue_threads() == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      EXPECT_EQ(StatErrno(mountpoint_), 0);
      std::this_thread::sleep_for(5ms);
    }
    return handler_.on_queue_threads() > 0;
  }

  std::future<int> StatInBackground() {
    return std::async(std::launch::async,
                      [path = mountpoint_] { return StatErrno(path); });
  }

  // Destroyed after TearDown (members go in reverse order): the futures
  // first, once the unmount has ended their stat calls.
  BlockingRootHandler handler_;
  std::string mountpoint_;
  std::unique_ptr<protocol::Session> session_;
  std::unique_ptr<KernelMount> mount_;
  std::unique_ptr<UringChannel> ring_;
  std::unique_ptr<ClassicChannel> classic_;
  std::future<int> taken_;
  std::future<void> stopped_;
  std::future<int> late_;
};

TEST_F(UringChannelStopTest, StopTakingWaitsForARequestStillOnItsWayIn) {
  ASSERT_TRUE(WaitForTheRing())
      << "no GETATTR came through a queue thread in 10 s (uring negotiated: "
      << session_->negotiated().uring() << ")";
  handler_.Arm();
  taken_ = StatInBackground();
  ASSERT_TRUE(handler_.WaitBlocked(10s))
      << "the armed GETATTR never reached the handler";
  stopped_ = std::async(std::launch::async, [this] { ring_->StopTaking(); });
  // The queue thread is still in its round, handing the request on.
  EXPECT_EQ(stopped_.wait_for(300ms), std::future_status::timeout)
      << "StopTaking returned while a queue thread was still handing a "
         "request to the Session";
  handler_.Release();
  ASSERT_EQ(stopped_.wait_for(10s), std::future_status::ready)
      << "StopTaking did not return once the request was handed on";
  // Taken before the stop: answered.
  ASSERT_EQ(taken_.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(taken_.get(), 0);

  // After the stop a request is left to the kernel, which ends it when the
  // mount goes; the handler never sees it.
  const int before = handler_.getattrs();
  late_ = StatInBackground();
  EXPECT_EQ(late_.wait_for(300ms), std::future_status::timeout)
      << "a request made after StopTaking was answered";
  EXPECT_EQ(handler_.getattrs(), before);
  classic_->StopReading();
  ring_->Stop();
  classic_->Close();
  mount_->Unmount();
  ASSERT_EQ(late_.wait_for(10s), std::future_status::ready)
      << "the request made after StopTaking outlived the unmount";
  EXPECT_NE(late_.get(), 0);
}

}  // namespace
}  // namespace pvdisk::fuse::channel
