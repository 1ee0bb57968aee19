// The "uring" engine: asynchronous I/O on the image through one io_uring.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"

namespace pvdisk::io {

// Returns an engine over `files` (non-empty, each outliving the engine),
// after checking that this kernel and its settings allow io_uring at all
// (if not: an error "io_uring is not available: <strerror>" whose code
// follows the errno, e.g. Unimplemented for ENOSYS, PermissionDenied for
// EPERM). At most `options.depth` plus `options.extra_ios` requests may be
// in flight; Queue() refuses more with -EBUSY. The files are registered as
// fixed files, in order, so that IoRequest::file is the fixed-file slot (on
// a borrowed ring, after the lender's own: RingLender::AddFixedFiles); where
// the ring cannot take them, requests name the plain descriptors.
//
// The ring itself is set up on the first Queue() or Run(), so that the thread
// that uses the engine owns it: it is created with IORING_SETUP_SINGLE_ISSUER
// | IORING_SETUP_DEFER_TASKRUN when the kernel allows, which tie it to one
// thread. WatchWakeFd() does not touch the ring and may come first, from any
// thread. Destroy the engine on the thread that used it, or after that thread
// has exited.
absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringEngine(
    const EngineFiles& files, const EngineOptions& options);

}  // namespace pvdisk::io
