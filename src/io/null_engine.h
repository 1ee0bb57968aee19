// The "null" engine: no I/O at all. Reads return zeros, everything else
// succeeds at once. Measures the cost of everything above the engine.
#pragma once

#include <memory>

#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"

namespace pvdisk::io {

// Uses `image` only for its size (to reject requests outside it) and
// `options.depth` only to size its result list.
std::unique_ptr<IoEngine> CreateNullEngine(const ImageFile& image,
                                           const EngineOptions& options);

}  // namespace pvdisk::io
