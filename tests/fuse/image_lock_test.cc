// One writer per image: a second read-write mount of an image in use (by
// pvdisk, or by qemu-storage-daemon, which takes the same OFD locks) exits 2
// naming the image, and mounts nothing; read-only mounts share; lock=off
// opts out.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Checks a refused mount: exit 2, one line naming the image and that it is
// in use, nothing mounted, no daemon left.
void ExpectRefusedInUse(const CommandResult& result, const std::string& image,
                        const std::string& mountpoint) {
  ExpectUsageError(result);
  EXPECT_NE(result.err.find("image " + image + " is in use"), std::string::npos)
      << result.Describe();
  EXPECT_FALSE(IsMounted(mountpoint));
  EXPECT_TRUE(
      WaitUntil([&] { return PvdiskProcessesMentioning(mountpoint).empty(); },
                std::chrono::seconds(10)))
      << "a refused mount left a daemon behind";
}

class ImageLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PVDISK_REQUIRE_FUSE();
    image_ = dir_.Path("disk0.img");
    CreateImage(image_, 16 * kMiB);
  }
  CommandResult MountAgain(const std::string& name,
                           const std::string& disk_arg) {
    return RunPvdisk({"mount", dir_.MakeDir(name), "--disk", disk_arg});
  }

  TempDir dir_;
  std::string image_;
};

TEST_F(ImageLockTest, SecondReadWriteMountIsRefused) {
  Mount first(dir_.MakeDir("first"), {"--disk", image_});
  ASSERT_TRUE(first.ok()) << first.mount_result().Describe();
  EXPECT_EQ(StatsOf(first.mountpoint(), "disk0.img").config["lock"], "on");
  ExpectRefusedInUse(MountAgain("second", image_), image_, dir_.Path("second"));
  // The first mount is unharmed and still serves.
  Fd fd = Open(first.Path("disk0.img"), O_RDWR);
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  PwriteAll(fd.get(), 0, "still mine");
  EXPECT_EQ(PreadAll(fd.get(), 0, 10), "still mine");
}

TEST_F(ImageLockTest, ReadOnlyMountsShareAnImage) {
  Mount first(dir_.MakeDir("first"), {"--disk", image_ + ",ro"});
  ASSERT_TRUE(first.ok()) << first.mount_result().Describe();
  Mount second(dir_.MakeDir("second"), {"--disk", image_ + ",ro"});
  ASSERT_TRUE(second.ok()) << second.mount_result().Describe();
  Fd a = Open(first.Path("disk0.img"), O_RDONLY);
  Fd b = Open(second.Path("disk0.img"), O_RDONLY);
  ASSERT_TRUE(a.valid() && b.valid());
  EXPECT_EQ(PreadAll(a.get(), 0, 4096), PreadAll(b.get(), 0, 4096));
}

TEST_F(ImageLockTest, ReadOnlyMountOfAnImageInUseForWritingIsRefused) {
  Mount writer(dir_.MakeDir("writer"), {"--disk", image_});
  ASSERT_TRUE(writer.ok()) << writer.mount_result().Describe();
  ExpectRefusedInUse(MountAgain("reader", image_ + ",ro"), image_,
                     dir_.Path("reader"));
}

TEST_F(ImageLockTest, ReadWriteMountOfAnImageReadElsewhereIsRefused) {
  Mount reader(dir_.MakeDir("reader"), {"--disk", image_ + ",ro"});
  ASSERT_TRUE(reader.ok()) << reader.mount_result().Describe();
  ExpectRefusedInUse(MountAgain("writer", image_), image_, dir_.Path("writer"));
}

TEST_F(ImageLockTest, LockOffAllowsASecondWriter) {
  Mount first(dir_.MakeDir("first"), {"--disk", image_});
  ASSERT_TRUE(first.ok()) << first.mount_result().Describe();
  Mount second(dir_.MakeDir("second"), {"--disk", image_ + ",lock=off"});
  ASSERT_TRUE(second.ok()) << second.mount_result().Describe();
  EXPECT_EQ(StatsOf(second.mountpoint(), "disk0.img").config["lock"], "off");
  EXPECT_EQ(StatsOf(first.mountpoint(), "disk0.img").config["lock"], "on");
}

TEST_F(ImageLockTest, TheImageIsFreeAgainAfterUnmount) {
  {
    Mount first(dir_.MakeDir("first"), {"--disk", image_});
    ASSERT_TRUE(first.ok()) << first.mount_result().Describe();
    CommandResult unmounted = first.Unmount();
    ASSERT_EQ(unmounted.exit_code, 0) << unmounted.Describe();
  }
  Mount second(dir_.MakeDir("second"), {"--disk", image_});
  EXPECT_TRUE(second.ok()) << second.mount_result().Describe();
}

// A daemon killed with SIGKILL in the middle of writes leaves its locks to
// the kernel, which drops them once it has torn down the daemon's io_uring;
// a mount right after the dead mount is detached still succeeds.
TEST_F(ImageLockTest, TheImageIsFreeRightAfterItsDaemonIsKilled) {
  std::string mountpoint = dir_.MakeDir("mnt");
  {
    Mount killed(mountpoint, {"--disk", image_});
    ASSERT_TRUE(killed.ok()) << killed.mount_result().Describe();
    Fd fd = Open(killed.Path("disk0.img"), O_WRONLY | O_DIRECT);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    std::atomic<bool> failed{false};
    std::thread writer([&] {
      void* buffer = nullptr;
      if (posix_memalign(&buffer, 4096, 1 << 20) != 0) return;
      std::memset(buffer, 0x5a, 1 << 20);
      for (uint64_t i = 0; !failed; ++i) {
        if (pwrite(fd.get(), buffer, 1 << 20, (i % 16) << 20) < 0) {
          failed = true;
        }
      }
      free(buffer);
    });
    // Killed in the middle of writes: once some are done and one is in
    // the daemon.
    const bool writing = WaitUntil(
        [&] {
          DiskStats stats = StatsOf(killed.mountpoint(), "disk0.img");
          return stats["writes_done"] > 0 &&
                 stats["fuse_writes"] > stats["writes_done"];
        },
        std::chrono::seconds(30));
    kill(killed.daemon_pid(), SIGKILL);
    writer.join();  // the dead connection fails the next write
    EXPECT_TRUE(writing) << "the writer's writes never were in the daemon";
    fd.Close();
    CommandResult detached = killed.Unmount();
    EXPECT_EQ(detached.exit_code, 0) << detached.Describe();
  }
  Mount again(mountpoint, {"--disk", image_});
  EXPECT_TRUE(again.ok()) << again.mount_result().Describe();
}

// qemu-storage-daemon serving the image over NBD on a unix socket (a
// writable export, so it holds the write permission), started with
// --daemonize so that it runs once the export is ready, and stopped with
// SIGTERM (SIGKILL if it lingers).
class QemuStorageDaemon {
 public:
  QemuStorageDaemon(const TempDir& dir, const std::string& image,
                    bool writable) {
    pidfile_ = dir.Path("qsd.pid");
    result_ = RunCommand(
        {"qemu-storage-daemon", "--blockdev",
         "driver=file,node-name=f,filename=" + image, "--nbd-server",
         "addr.type=unix,addr.path=" + dir.Path("qsd.sock"), "--export",
         std::string("type=nbd,id=e,node-name=f,writable=") +
             (writable ? "on" : "off"),
         "--pidfile", pidfile_, "--daemonize"},
        std::chrono::seconds(30));
    if (result_.exit_code == 0) {
      std::ifstream in(pidfile_);
      in >> pid_;
    }
  }
  ~QemuStorageDaemon() { Stop(); }

  bool running() const { return pid_ > 0; }
  const CommandResult& result() const { return result_; }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    // The daemonized process is reparented to this test process (a child
    // subreaper, see fuse_harness.h), so it is reaped here.
    auto gone = [&] {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) return true;
      return kill(pid_, 0) != 0 && errno == ESRCH;
    };
    if (!WaitUntil(gone, std::chrono::seconds(10))) {
      kill(pid_, SIGKILL);
      WaitUntil(gone, std::chrono::seconds(10));
    }
    pid_ = -1;
  }

 private:
  std::string pidfile_;
  CommandResult result_;
  pid_t pid_ = -1;
};

std::string QemuStorageDaemonMissing() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    if (access((std::string(dir) + "/qemu-storage-daemon").c_str(), X_OK) ==
        0) {
      return "";
    }
  }
  return "qemu-storage-daemon is not installed (Debian package "
         "qemu-system-common; scripts/install-deps.sh installs it)";
}

TEST_F(ImageLockTest, MountIsRefusedWhileQemuStorageDaemonWritesTheImage) {
  if (std::string why = QemuStorageDaemonMissing(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  QemuStorageDaemon qsd(dir_, image_, /*writable=*/true);
  ASSERT_TRUE(qsd.running()) << qsd.result().Describe();
  ExpectRefusedInUse(MountAgain("rw", image_), image_, dir_.Path("rw"));
  ExpectRefusedInUse(MountAgain("ro", image_ + ",ro"), image_, dir_.Path("ro"));
  qsd.Stop();
  Mount after(dir_.MakeDir("after"), {"--disk", image_});
  EXPECT_TRUE(after.ok()) << after.mount_result().Describe();
}

TEST_F(ImageLockTest, QemuStorageDaemonRefusesAnImagePvdiskWrites) {
  if (std::string why = QemuStorageDaemonMissing(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  Mount mount(dir_.MakeDir("mnt"), {"--disk", image_});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  QemuStorageDaemon qsd(dir_, image_, /*writable=*/true);
  EXPECT_FALSE(qsd.running()) << "qemu-storage-daemon opened an image "
                                 "pvdisk serves read-write";
  EXPECT_NE(qsd.result().exit_code, 0) << qsd.result().Describe();
  EXPECT_NE(qsd.result().err.find("lock"), std::string::npos)
      << qsd.result().Describe();
}

}  // namespace
}  // namespace pvdisk::fuse_testing
