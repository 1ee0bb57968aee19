// The "null" engine: no I/O at all. Reads return zeros, everything else
// succeeds at once. Measures the cost of everything above the engine.
#pragma once

#include <memory>

#include "io/engine_factory.h"
#include "io/image_file.h"
#include "io/io_engine.h"

namespace pvdisk::io {

// Uses `files` only for their sizes (to reject requests outside them; the
// file index is otherwise ignored) and `options.depth` and
// `options.extra_ios` only to size its result list.
std::unique_ptr<IoEngine> CreateNullEngine(const EngineFiles& files,
                                           const EngineOptions& options);

}  // namespace pvdisk::io
