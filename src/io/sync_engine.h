// The "sync" engine: blocking preadv/pwritev/fdatasync/fallocate done inside
// Queue(). Slow but simple; a reference for the uring engine and a fallback
// where io_uring is not available.
#pragma once

#include <memory>

#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"

namespace pvdisk::io {

// Over `files` (non-empty, each outliving the engine): a request goes to
// the descriptor of the file IoRequest::file names. Uses `options.depth`
// and `options.extra_ios` only to size its result list.
std::unique_ptr<IoEngine> CreateSyncEngine(const EngineFiles& files,
                                           const EngineOptions& options);

}  // namespace pvdisk::io
