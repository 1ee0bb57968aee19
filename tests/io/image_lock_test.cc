// LockImage: one writer per image, with real OFD locks on real files, and
// the byte layout QEMU's file-posix driver uses, so that pvdisk and QEMU see
// each other.
#include "io/image_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

// One open of the image: its own open file description, as another process
// (or another pvdisk daemon) would have.
class Opening {
 public:
  Opening(const std::string& path, bool read_only)
      : fd_(open(path.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC)) {
    EXPECT_GE(fd_, 0) << path << ": " << std::strerror(errno);
  }
  ~Opening() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Takes a shared lock on one byte, as QEMU does for each permission it
// holds (100 + bit) or does not share (200 + bit).
void LockByteLikeQemu(int fd, off_t byte) {
  struct flock lock = {};
  lock.l_type = F_RDLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = byte;
  lock.l_len = 1;
  ASSERT_EQ(fcntl(fd, F_OFD_SETLK, &lock), 0) << std::strerror(errno);
}

// Whether an open file description other than `fd`'s holds a lock on
// `byte`: QEMU's own test (F_OFD_GETLK with a write lock).
bool SomeoneElseLocks(int fd, off_t byte) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = byte;
  lock.l_len = 1;
  EXPECT_EQ(fcntl(fd, F_OFD_GETLK, &lock), 0) << std::strerror(errno);
  return lock.l_type != F_UNLCK;
}

class ImageLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("disk.img");
    WriteFile(path_, 8192);
  }

  absl::Status Lock(const Opening& opening, bool read_only) {
    // No grace: a conflict here is a live one.
    return LockImage(opening.fd(), path_, read_only,
                     std::chrono::milliseconds(0));
  }

  void ExpectInUse(const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    std::string message(status.message());
    EXPECT_NE(message.find("image " + path_ + " is in use"), std::string::npos)
        << message;
    EXPECT_NE(message.find("lock=off"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(ImageLockTest, SecondWriterIsRefused) {
  Opening first(path_, false);
  Opening second(path_, false);
  ASSERT_TRUE(Lock(first, false).ok());
  ExpectInUse(Lock(second, false));
}

TEST_F(ImageLockTest, ReadersShare) {
  Opening first(path_, true);
  Opening second(path_, true);
  EXPECT_TRUE(Lock(first, true).ok());
  EXPECT_TRUE(Lock(second, true).ok());
}

TEST_F(ImageLockTest, ReaderAndWriterExcludeEachOther) {
  {
    Opening writer(path_, false);
    Opening reader(path_, true);
    ASSERT_TRUE(Lock(writer, false).ok());
    ExpectInUse(Lock(reader, true));
  }
  Opening reader(path_, true);
  Opening writer(path_, false);
  ASSERT_TRUE(Lock(reader, true).ok());
  ExpectInUse(Lock(writer, false));
}

TEST_F(ImageLockTest, ClosingTheHolderReleasesTheImage) {
  {
    Opening first(path_, false);
    ASSERT_TRUE(Lock(first, false).ok());
  }
  Opening second(path_, false);
  EXPECT_TRUE(Lock(second, false).ok());
}

TEST_F(ImageLockTest, ARefusedLockLeavesNoLockBehind) {
  std::optional<Opening> holder(std::in_place, path_, false);
  Opening refused(path_, false);
  Opening observer(path_, true);
  ASSERT_TRUE(Lock(*holder, false).ok());
  ExpectInUse(Lock(refused, false));
  // Only the holder's locks remain: once it is gone, nothing is locked.
  holder.reset();
  for (off_t byte = 100; byte < 300; ++byte) {
    EXPECT_FALSE(SomeoneElseLocks(observer.fd(), byte)) << "byte " << byte;
  }
}

// UnlockImage frees the image while the descriptor stays open (as an
// io_uring's registered file keeps the description open after exit).
TEST_F(ImageLockTest, UnlockFreesTheImageWhileStillOpen) {
  Opening first(path_, false);
  ASSERT_TRUE(Lock(first, false).ok());
  UnlockImage(first.fd());
  Opening second(path_, false);
  EXPECT_TRUE(Lock(second, false).ok());
}

// A holder that lets go while LockImage waits out its grace (as a killed
// daemon's io_uring does once the kernel has torn it down) does not make the
// image count as in use.
TEST_F(ImageLockTest, GraceOutlastsAHolderThatGoesAway) {
  auto holder = std::make_unique<Opening>(path_, false);
  ASSERT_TRUE(Lock(*holder, false).ok());
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    holder.reset();
  });
  Opening second(path_, false);
  absl::Status status =
      LockImage(second.fd(), path_, false, std::chrono::milliseconds(30000));
  release.join();
  EXPECT_TRUE(status.ok()) << status;
}

// OFD locks belong to the open file description: closing another
// descriptor of the same file (as an engine or a probe might) keeps them.
TEST_F(ImageLockTest, ClosingAnotherDescriptorKeepsTheLock) {
  Opening holder(path_, false);
  ASSERT_TRUE(Lock(holder, false).ok());
  { Opening other(path_, true); }
  Opening second(path_, false);
  ExpectInUse(Lock(second, false));
}

// The bytes a writer holds, as QEMU reads them: 100 (consistent read), 101
// (write), and 201 and 203 (write and resize not shared).
TEST_F(ImageLockTest, WriterHoldsQemusBytes) {
  Opening writer(path_, false);
  Opening observer(path_, true);
  ASSERT_TRUE(Lock(writer, false).ok());
  for (off_t byte : {100, 101, 201, 203}) {
    EXPECT_TRUE(SomeoneElseLocks(observer.fd(), byte)) << "byte " << byte;
  }
  for (off_t byte : {102, 103, 200, 202}) {
    EXPECT_FALSE(SomeoneElseLocks(observer.fd(), byte)) << "byte " << byte;
  }
}

// A QEMU user that writes (holds byte 101), such as qemu-storage-daemon's
// writable export, keeps pvdisk out, read-write or read-only.
TEST_F(ImageLockTest, QemuWriterKeepsPvdiskOut) {
  Opening qemu(path_, false);
  LockByteLikeQemu(qemu.fd(), 100);
  LockByteLikeQemu(qemu.fd(), 101);
  Opening writer(path_, false);
  ExpectInUse(Lock(writer, false));
  Opening reader(path_, true);
  ExpectInUse(Lock(reader, true));
}

// A QEMU reader that does not share writing (byte 201), such as qemu-img
// without -U, keeps a pvdisk writer out but shares with a pvdisk reader.
TEST_F(ImageLockTest, QemuReaderKeepsOnlyWritersOut) {
  Opening qemu(path_, true);
  LockByteLikeQemu(qemu.fd(), 100);
  LockByteLikeQemu(qemu.fd(), 201);
  Opening writer(path_, false);
  ExpectInUse(Lock(writer, false));
  Opening reader(path_, true);
  EXPECT_TRUE(Lock(reader, true).ok());
}

}  // namespace
}  // namespace pvdisk::io::testing
