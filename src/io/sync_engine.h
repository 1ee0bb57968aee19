// The "sync" engine: blocking preadv/pwritev/fdatasync/fallocate done inside
// Queue(). Slow but simple; a reference for the uring engine and a fallback
// where io_uring is not available.
#pragma once

#include <memory>

#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"

namespace pvdisk::io {

// `image` must outlive the engine. Uses `options.depth` only to size its
// result list.
std::unique_ptr<IoEngine> CreateSyncEngine(const ImageFile& image,
                                           const EngineOptions& options);

}  // namespace pvdisk::io
