#include "io/image_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/errno_status.h"
#include "base/status_macros.h"

// Linux 6.1 added STATX_DIOALIGN; older uapi headers lack the constant.
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif

namespace pvdisk::io {
namespace {

constexpr uint64_t kSectorBytes = 512;
// The alignment the rest of pvdisk guarantees for O_DIRECT: 512-byte offsets
// and lengths, 4096-byte aligned buffers.
constexpr uint64_t kMaxOffsetAlign = 512;
constexpr uint64_t kMaxMemoryAlign = 4096;

// Closes a descriptor on every early return.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string Buffered(absl::string_view reason) {
  return absl::StrCat("buffered (", reason, ")");
}

// Returns why O_DIRECT on `fd` cannot be used with pvdisk's alignment, as the
// kernel reports it through statx(STATX_DIOALIGN), or nullopt when it can be
// used or the kernel does not say.
std::optional<std::string> DirectAlignmentProblem(int fd) {
  struct statx stx = {};
  if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) != 0) {
    return std::nullopt;  // Old kernel: rely on the probe read.
  }
  if ((stx.stx_mask & STATX_DIOALIGN) == 0) return std::nullopt;
  if (stx.stx_dio_offset_align == 0) {
    return Buffered("the filesystem does not support O_DIRECT");
  }
  if (stx.stx_dio_offset_align > kMaxOffsetAlign) {
    return Buffered(absl::StrCat("O_DIRECT needs ", stx.stx_dio_offset_align,
                                 "-byte aligned offsets"));
  }
  if (stx.stx_dio_mem_align > kMaxMemoryAlign) {
    return Buffered(absl::StrCat("O_DIRECT needs ", stx.stx_dio_mem_align,
                                 "-byte aligned buffers"));
  }
  return std::nullopt;
}

// Reads the first sector through `fd` (opened with O_DIRECT). Returns 0 or
// the errno of the failed read.
int ProbeDirectRead(int fd) {
  void* buffer = std::aligned_alloc(kMaxMemoryAlign, kMaxMemoryAlign);
  if (buffer == nullptr) return ENOMEM;
  ssize_t n;
  do {
    n = pread(fd, buffer, kSectorBytes, 0);
  } while (n < 0 && errno == EINTR);
  int error = n < 0 ? errno : 0;
  std::free(buffer);
  return error;
}

// Turns O_DIRECT off on an open descriptor. Done with fcntl rather than a
// second open() so that the descriptor keeps naming the file we checked.
absl::Status DropDirect(int fd, const std::string& path) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) {
    return ErrnoError(errno,
                      absl::StrCat("image ", path, " cannot leave O_DIRECT"));
  }
  return absl::OkStatus();
}

// Opens `target` (a path, or /proc/self/fd/N of an open image) with
// `access`, with O_DIRECT first when `direct`; falls back to buffered I/O
// when the file system refuses O_DIRECT at open. Returns the descriptor or
// -1 with errno set, and updates `direct` and `note`.
int OpenMaybeDirect(const std::string& target, int access, bool* direct,
                    std::string* note) {
  int raw_fd = open(target.c_str(), access | (*direct ? O_DIRECT : 0));
  if (raw_fd < 0 && *direct && errno == EINVAL) {
    *direct = false;
    *note = Buffered(absl::StrCat("O_DIRECT refused: ", std::strerror(EINVAL)));
    raw_fd = open(target.c_str(), access);
  }
  return raw_fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ImageFile>> ImageFile::Open(
    const std::string& path, bool read_only, bool want_direct,
    Content content) {
  struct stat st = {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("image ", path, " does not exist"));
    }
    return ErrnoError(errno, absl::StrCat("image ", path, " cannot be opened"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", path, " is not a regular file"));
  }

  const int access = (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  bool direct = want_direct;
  std::string note =
      want_direct ? "O_DIRECT" : Buffered("O_DIRECT not requested");
  int raw_fd = OpenMaybeDirect(path, access, &direct, &note);
  if (raw_fd < 0) {
    return ErrnoError(errno, absl::StrCat("image ", path, " cannot be opened"));
  }
  return Finish(raw_fd, path, read_only, direct, std::move(note), content);
}

absl::StatusOr<std::unique_ptr<ImageFile>> ImageFile::Reopen(
    int fd, const std::string& label, bool read_only, bool want_direct,
    Content content) {
  struct stat given = {};
  if (fstat(fd, &given) != 0) {
    return ErrnoError(errno,
                      absl::StrCat("image ", label, " cannot be opened"));
  }
  if (!S_ISREG(given.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", label, " is not a regular file"));
  }
  // /proc/self/fd/N is the open file itself, not a name: opening it yields
  // the same inode, even after the image was renamed, removed or replaced.
  const std::string target = absl::StrCat("/proc/self/fd/", fd);
  const int access = (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  bool direct = want_direct;
  std::string note =
      want_direct ? "O_DIRECT" : Buffered("O_DIRECT not requested");
  int raw_fd = OpenMaybeDirect(target, access, &direct, &note);
  if (raw_fd < 0) {
    return ErrnoError(errno, absl::StrCat("image ", label,
                                          " cannot be opened "
                                          "again from its descriptor"));
  }
  FdCloser closer(raw_fd);
  struct stat reopened = {};
  if (fstat(raw_fd, &reopened) != 0) {
    return ErrnoError(errno,
                      absl::StrCat("image ", label, " cannot be opened"));
  }
  // What the kernel guarantees, checked: I/O must go to the file given.
  if (reopened.st_dev != given.st_dev || reopened.st_ino != given.st_ino) {
    return absl::InternalError(absl::StrCat("image ", label, ": opening ",
                                            target, " gave another file"));
  }
  return Finish(closer.release(), label, read_only, direct, std::move(note),
                content);
}

absl::StatusOr<std::unique_ptr<ImageFile>> ImageFile::Finish(
    int raw_fd, const std::string& path, bool read_only, bool direct,
    std::string note, Content content) {
  FdCloser fd(raw_fd);

  // Size and type from the descriptor: the path may have changed between
  // stat() and open().
  struct stat st = {};
  if (fstat(raw_fd, &st) != 0) {
    return ErrnoError(errno, absl::StrCat("image ", path, " cannot be opened"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", path, " is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // A layer's offsets are what its tables name: bits 9..55, as qcow2 keeps
  // them (kOffsetMask in image/qcow2/entries.h).
  constexpr uint64_t kLayerLimit = uint64_t{1} << 56;
  const uint64_t limit = content == Content::kLayer ? kLayerLimit : size;
  if (content == Content::kRawDisk && size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image ", path, " has size 0; it needs at least one 512-byte sector"));
  }
  if (content == Content::kRawDisk && size % kSectorBytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", path, " has size ", size,
                     ", which is not a multiple of 512 bytes"));
  }

  if (direct) {
    if (std::optional<std::string> problem = DirectAlignmentProblem(raw_fd)) {
      direct = false;
      note = *std::move(problem);
    } else if (int error = ProbeDirectRead(raw_fd); error == EINVAL) {
      direct = false;
      note = Buffered(absl::StrCat("O_DIRECT refused: ", std::strerror(error)));
    } else if (error != 0) {
      return ErrnoError(error, absl::StrCat("image ", path, " cannot be read"));
    }
    if (!direct) PVDISK_RETURN_IF_ERROR(DropDirect(raw_fd, path));
  }

  return std::unique_ptr<ImageFile>(new ImageFile(
      fd.release(), st, direct, read_only, path, std::move(note), limit));
}

ImageFile::~ImageFile() {
  if (fd_ >= 0) close(fd_);
}

absl::Status CreateImage(const std::string& path, uint64_t size_bytes,
                         bool force) {
  if (size_bytes == 0 || size_bytes % kSectorBytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("image size ", size_bytes, " for ", path,
                     " is not a positive multiple of 512 bytes"));
  }
  if (size_bytes > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image size ", size_bytes, " for ", path, " is too large"));
  }

  struct stat st = {};
  const bool existed = lstat(path.c_str(), &st) == 0;
  if (existed && !force) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, " already exists; pass --force to overwrite it"));
  }
  if (existed && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " exists and is not a regular file; refusing to overwrite it"));
  }

  // Without force, O_EXCL makes "does not exist yet" hold at creation time
  // too. With force, O_TRUNC drops the old contents so that the ftruncate
  // below yields a fresh, fully sparse image.
  const int flags =
      O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (force ? O_TRUNC : O_EXCL);
  int raw_fd = open(path.c_str(), flags, 0644);
  if (raw_fd < 0) {
    const int error = errno;
    if (error == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(path, " already exists; pass --force to overwrite it"));
    }
    if (error == ENOENT) {
      const size_t slash = path.find_last_of('/');
      const std::string parent = slash == std::string::npos
                                     ? "."
                                     : path.substr(0, slash == 0 ? 1 : slash);
      return absl::NotFoundError(absl::StrCat("cannot create image ", path,
                                              ": directory ", parent,
                                              " does not exist"));
    }
    return ErrnoError(error, absl::StrCat("cannot create image ", path));
  }
  FdCloser fd(raw_fd);

  // From here on the file is ours (new, or already emptied by O_TRUNC): on
  // failure remove it rather than leave a half-made image behind.
  auto fail = [&path](int error, const std::string& context) {
    unlink(path.c_str());
    return ErrnoError(error, context);
  };
  if (ftruncate(raw_fd, static_cast<off_t>(size_bytes)) != 0) {
    return fail(errno, absl::StrCat("cannot set the size of image ", path,
                                    " to ", size_bytes, " bytes"));
  }
  if (close(fd.release()) != 0) {
    return fail(errno, absl::StrCat("cannot finish creating image ", path));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::io
