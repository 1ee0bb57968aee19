#include "io/image_lock.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace pvdisk::io {
namespace {

// The byte offsets QEMU's file-posix driver uses (block/file-posix.c).
constexpr off_t kHeldBase = 100;      // + permission: "I hold it"
constexpr off_t kUnsharedBase = 200;  // + permission: "I do not share it"

enum Permission : unsigned {
  kConsistentRead = 0,
  kWrite = 1,
  kWriteUnchanged = 2,
  kResize = 3,
};
constexpr unsigned kPermissionCount = 4;

constexpr uint32_t Bit(Permission p) { return uint32_t{1} << p; }

const char* PermissionName(unsigned p) {
  switch (p) {
    case kConsistentRead:
      return "reading";
    case kWrite:
      return "writing";
    case kWriteUnchanged:
      return "unchanged writes";
    case kResize:
      return "resizing";
  }
  return "?";
}

struct Permissions {
  uint32_t held = 0;
  uint32_t shared = 0;
};

Permissions PermissionsFor(bool read_only) {
  Permissions p;
  p.held = Bit(kConsistentRead) | (read_only ? 0 : Bit(kWrite));
  p.shared = Bit(kConsistentRead) | Bit(kWriteUnchanged);
  return p;
}

int SetByte(int fd, off_t offset, short type) {
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = offset;
  lock.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &lock) == 0 ? 0 : errno;
}

// Whether another open file description holds a lock on the byte at
// `offset`; 0 or an errno.
int OtherHolds(int fd, off_t offset, bool* held) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = offset;
  lock.l_len = 1;
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return errno;
  *held = lock.l_type != F_UNLCK;
  return 0;
}

// The bytes a user with `p` locks.
std::vector<off_t> BytesOf(const Permissions& p) {
  std::vector<off_t> bytes;
  for (unsigned i = 0; i < kPermissionCount; ++i) {
    if (p.held & (1u << i)) bytes.push_back(kHeldBase + i);
    if (!(p.shared & (1u << i))) bytes.push_back(kUnsharedBase + i);
  }
  return bytes;
}

void Unlock(int fd, const std::vector<off_t>& bytes) {
  for (off_t byte : bytes) SetByte(fd, byte, F_UNLCK);
}

// Every byte either kind of disk may lock.
constexpr off_t kFirstByte = kHeldBase;
constexpr off_t kEndByte = kUnsharedBase + kPermissionCount;

std::string InUse(const std::string& path, const std::string& why) {
  return absl::StrCat("image ", path, " is in use: ", why,
                      "; nothing was mounted (--disk ", path,
                      ",lock=off skips this check)");
}

// One attempt of LockImage.
absl::Status TryLockImage(int fd, const std::string& path, bool read_only) {
  const Permissions mine = PermissionsFor(read_only);
  const std::vector<off_t> bytes = BytesOf(mine);
  for (off_t byte : bytes) {
    if (int error = SetByte(fd, byte, F_RDLCK); error != 0) {
      Unlock(fd, bytes);
      if (error == EAGAIN || error == EACCES) {
        // Someone holds an exclusive lock on our bytes: not a QEMU-style
        // user, but certainly one that wants the image to itself.
        return absl::FailedPreconditionError(
            InUse(path, "another process holds an exclusive lock on it"));
      }
      return ErrnoError(
          error,
          absl::StrCat("image ", path, " cannot be locked (byte ", byte, ")"));
    }
  }
  // Each check: the byte someone else must not lock, and what it means if
  // they do.
  struct Check {
    off_t byte;
    std::string conflict;
  };
  std::vector<Check> checks;
  for (unsigned i = 0; i < kPermissionCount; ++i) {
    const uint32_t bit = 1u << i;
    if (mine.held & bit) {
      checks.push_back({kUnsharedBase + i,
                        absl::StrCat("another process uses it and does not "
                                     "share ",
                                     PermissionName(i), " with others")});
    }
    if (!(mine.shared & bit)) {
      checks.push_back(
          {kHeldBase + i, absl::StrCat("another process has it open for ",
                                       PermissionName(i))});
    }
  }
  for (const Check& check : checks) {
    bool held = false;
    if (int error = OtherHolds(fd, check.byte, &held); error != 0) {
      Unlock(fd, bytes);
      return ErrnoError(
          error, absl::StrCat("image ", path, " cannot be checked for locks"));
    }
    if (held) {
      Unlock(fd, bytes);
      return absl::FailedPreconditionError(InUse(path, check.conflict));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LockImage(int fd, const std::string& path, bool read_only,
                       std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (true) {
    absl::Status status = TryLockImage(fd, path, read_only);
    if (status.code() != absl::StatusCode::kFailedPrecondition ||
        std::chrono::steady_clock::now() >= deadline) {
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

absl::Status JoinImageLock(int fd, const std::string& path, bool read_only) {
  const std::vector<off_t> bytes = BytesOf(PermissionsFor(read_only));
  for (off_t byte : bytes) {
    if (int error = SetByte(fd, byte, F_RDLCK); error != 0) {
      Unlock(fd, bytes);
      return ErrnoError(
          error,
          absl::StrCat("image ", path, " cannot be locked (byte ", byte, ")"));
    }
  }
  return absl::OkStatus();
}

void UnlockImage(int fd) {
  struct flock lock = {};
  lock.l_type = F_UNLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = kFirstByte;
  lock.l_len = kEndByte - kFirstByte;
  fcntl(fd, F_OFD_SETLK, &lock);
}

}  // namespace pvdisk::io
