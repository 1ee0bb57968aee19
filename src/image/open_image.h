// Opening an image: by its path or RBD name (the daemon), or from the
// descriptors of its files (a backend process, which gets the daemon's opens
// over SCM_RIGHTS). Both end in one place that builds the image from its
// open files, so the backend serves the very image the daemon opened.
#pragma once

#include <memory>
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

}  // namespace pvdisk::image
