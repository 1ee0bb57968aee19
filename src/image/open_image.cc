#include "image/open_image.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/header.h"
#include "image/qcow2_image.h"
#include "image/raw_image.h"
#include "image/rbd_volume.h"
#include "io/image_file.h"
#include "io/image_lock.h"
#include "io/rbd_image.h"

namespace pvdisk::image {
namespace {

// How an image's files come to hold its lock.
enum class LockHow {
  kTake,  // the first open: take it, failing if another user holds it
  kJoin,  // another open of files the opener has locked: take it alongside
};

// The one place an image of files is built from its open files, whoever
// opened them.
absl::StatusOr<std::shared_ptr<Image>> FromOpenFiles(
    const ImageSpec& spec, std::vector<std::unique_ptr<io::ImageFile>> files,
    LockHow lock_how) {
  if (files.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", spec.path, " is a raw image of one file, not ",
                     files.size()));
  }
  // Locked before anything else is built on the image, so that a refused
  // mount creates nothing; held as long as the image stays open.
  bool locked = false;
  if (spec.lock) {
    const int fd = files[0]->fd();
    PVDISK_RETURN_IF_ERROR(
        lock_how == LockHow::kTake
            ? io::LockImage(fd, spec.path, spec.read_only)
            : io::JoinImageLock(fd, spec.path, spec.read_only));
    locked = true;
  }
  return std::make_shared<RawImage>(std::move(files[0]), spec.engine, locked,
                                    spec.format == ImageFormat::kProbe);
}

// Whether the file open as `fd` starts with the qcow2 magic. One aligned
// read, so that it works on a file opened with O_DIRECT too.
absl::StatusOr<bool> IsQcow2(int fd, const std::string& path) {
  constexpr size_t kProbeBytes = 4096;
  void* buffer = nullptr;
  if (posix_memalign(&buffer, kProbeBytes, kProbeBytes) != 0) {
    return absl::ResourceExhaustedError("no memory to probe the image");
  }
  std::unique_ptr<void, decltype(&free)> owned(buffer, &free);
  const ssize_t got = pread(fd, buffer, kProbeBytes, 0);
  if (got < 0) return ErrnoError(errno, absl::StrCat("cannot read ", path));
  return got >= 4 && qcow2::LoadBe32(static_cast<const uint8_t*>(buffer)) ==
                         qcow2::kQcow2Magic;
}

// Whether to serve the file open as `fd` as qcow2: as `format` says, or as
// its first bytes say when the format is probed. format=qcow2 on a file
// without the qcow2 magic is refused; format=raw serves a qcow2 file's
// bytes raw (the user's word).
absl::StatusOr<bool> ServeAsQcow2(int fd, const std::string& path,
                                  ImageFormat format) {
  if (format == ImageFormat::kRaw) return false;
  PVDISK_ASSIGN_OR_RETURN(const bool is_qcow2, IsQcow2(fd, path));
  if (format == ImageFormat::kQcow2 && !is_qcow2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " is not a qcow2 image (no qcow2 magic in its first bytes), "
        "but format=qcow2 says it is; give format=raw to serve it raw"));
  }
  return is_qcow2;
}

// As above for the file at `path`; false when it cannot be opened (opening
// it as raw then says why).
absl::StatusOr<bool> ServeAsQcow2(const std::string& path, ImageFormat format) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  absl::StatusOr<bool> qcow2 = ServeAsQcow2(fd, path, format);
  close(fd);
  return qcow2;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Image>> OpenImage(const ImageSpec& spec) {
  if (spec.rbd) {
    PVDISK_ASSIGN_OR_RETURN(std::unique_ptr<io::RbdImage> rbd,
                            io::RbdImage::Open(*spec.rbd, spec.read_only));
    return std::make_shared<RbdVolume>(std::move(rbd));
  }
  PVDISK_ASSIGN_OR_RETURN(const bool qcow2,
                          ServeAsQcow2(spec.path, spec.format));
  if (qcow2) return Qcow2Image::Open(spec, nullptr);
  if (!spec.snapshot.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.path, ": snapshot=", spec.snapshot,
                     " applies to qcow2 images, and this one is raw"));
  }
  std::vector<std::unique_ptr<io::ImageFile>> files;
  PVDISK_ASSIGN_OR_RETURN(files.emplace_back(),
                          io::ImageFile::Open(spec.path, spec.read_only,
                                              EngineWantsDirect(spec.engine)));
  return FromOpenFiles(spec, std::move(files), LockHow::kTake);
}

absl::StatusOr<std::shared_ptr<Image>> OpenImageFromFiles(
    const ImageSpec& spec, const std::vector<int>& fds) {
  if (spec.rbd) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.rbd->Name(), " is an RBD image: it has no files to open"));
  }
  if (!fds.empty()) {
    PVDISK_ASSIGN_OR_RETURN(const bool qcow2,
                            ServeAsQcow2(fds.front(), spec.path, spec.format));
    if (qcow2) return Qcow2Image::Open(spec, &fds);
  }
  std::vector<std::unique_ptr<io::ImageFile>> files;
  for (int fd : fds) {
    // An open of our own: its own locks (which belong to an open file
    // description) and O_DIRECT as the engine wants it.
    PVDISK_ASSIGN_OR_RETURN(
        files.emplace_back(),
        io::ImageFile::Reopen(fd, spec.path, spec.read_only,
                              EngineWantsDirect(spec.engine)));
  }
  return FromOpenFiles(spec, std::move(files), LockHow::kJoin);
}

absl::StatusOr<std::shared_ptr<Image>> OpenSameImage(
    const ImageSpec& spec, const std::vector<int>& fds,
    const std::string& identity) {
  if (!spec.rbd) return OpenImageFromFiles(spec, fds);
  if (!fds.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.rbd->Name(),
                     " is an RBD image: it has no files, not ", fds.size()));
  }
  PVDISK_ASSIGN_OR_RETURN(std::shared_ptr<Image> image, OpenImage(spec));
  if (image->identity() != identity) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec.rbd->Name(), " is no longer the image the mount opened (image id ",
        identity, ", now ", image->identity(),
        "): it was removed and created again"));
  }
  return image;
}

}  // namespace pvdisk::image
