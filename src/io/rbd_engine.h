// The rbd engine: serves requests from an RBD image through librbd's
// asynchronous API (rbd_aio_readv/writev/flush/discard/write_zeroes), one
// engine per backend thread, all sharing the disk's RbdImage. No thread per
// request: librbd's completion callback hands each finished request to the
// mailbox of the engine that submitted it and signals the mailbox's
// eventfd, which Run() polls together with the watched wake fds, or, with
// options.ring_lender (the inline placement), which a poll armed on the
// lent ring watches.
// Every error the cluster reports reaches the caller as -EIO.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"
#include "io/rbd_image.h"

namespace pvdisk::io {

// An engine for `image` (which must outlive it) of options.depth, wrapped
// like every engine (options.fault, options.delay, the test faults; see
// engine_factory.h). options.kind is ignored.
absl::StatusOr<std::unique_ptr<IoEngine>> CreateRbdEngine(
    const EngineOptions& options, RbdImage& image);

}  // namespace pvdisk::io
