// Opening an image: by its path or RBD name (the daemon), or from the
// descriptors of its files (a backend process, which gets the daemon's opens
// over SCM_RIGHTS). Both end in one place that builds the image from its
// open files, so the backend serves the very image the daemon opened.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "image/image.h"
#include "image/image_spec.h"

namespace pvdisk::image {

// Opens the image `spec` names and, with spec.lock, locks it against other
// users (io::LockImage: fails if one holds it). Errors are one line naming
// the image and what is wrong.
absl::StatusOr<std::shared_ptr<Image>> OpenImage(const ImageSpec& spec);

// Opens again, through /proc/self/fd (io::ImageFile::Reopen), the files open
// as `fds` (another process's opens of an image's files(), in that order)
// and builds the same image from them; spec.path only names it in messages.
// With spec.lock, joins the lock the opener already holds
// (io::JoinImageLock), so the image stays locked while this open has I/O in
// flight. `fds` stay the caller's. An image without files (spec.rbd) cannot
// be opened so.
absl::StatusOr<std::shared_ptr<Image>> OpenImageFromFiles(
    const ImageSpec& spec, const std::vector<int>& fds);

// A backend process's open of the image another process opened as `spec`,
// with Image::identity() `identity`: an image of files from `fds` (its
// opener's descriptors, OpenImageFromFiles); an RBD image, which has no
// files, by its name from spec.rbd (as the opener resolved it), checked to
// be the same image: an RBD image removed and created again under its name
// has another id, and is refused. An RBD image's writers share it through
// librbd's exclusive lock (see RbdVolume).
absl::StatusOr<std::shared_ptr<Image>> OpenSameImage(
    const ImageSpec& spec, const std::vector<int>& fds,
    const std::string& identity);

}  // namespace pvdisk::image
