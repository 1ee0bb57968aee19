// The "uring" engine: asynchronous I/O on the image through one io_uring.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"

namespace pvdisk::io {

// Returns an engine for `image`, which must outlive it, after checking that
// this kernel and its settings allow io_uring at all (if not: an error
// "io_uring is not available: <strerror>" whose code follows the errno, e.g.
// Unimplemented for ENOSYS, PermissionDenied for EPERM). At most
// `options.depth` requests may be in flight; Queue() refuses more with -EBUSY.
//
// The ring itself is set up on the first Queue() or Run(), so that the thread
// that uses the engine owns it: it is created with IORING_SETUP_SINGLE_ISSUER
// | IORING_SETUP_DEFER_TASKRUN when the kernel allows, which tie it to one
// thread. WatchWakeFd() does not touch the ring and may come first, from any
// thread. Destroy the engine on the thread that used it, or after that thread
// has exited.
absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringEngine(
    const ImageFile& image, const EngineOptions& options);

}  // namespace pvdisk::io
