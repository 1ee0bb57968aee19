// The engine decorator of a disk with a volatile write cache
// (io/volatile_cache.h): writes are held in the disk's cache and complete
// at once, flushes write the cache out, reads are overlaid with what is
// held, and after a power cut every request fails with -EIO. It sits right
// over the file engine, under every other decorator (faults, delay), where
// a disk's own cache is. It holds the I/O of file 0 (IoRequest::file), the
// disk's own file; a format's backing layers (files 1 and up, read-only)
// pass through.
#pragma once

#include <memory>

#include "io/io_engine.h"
#include "io/volatile_cache.h"

namespace pvdisk::io {

// Wraps `inner` with `cache`, shared by every engine of the disk. name() is
// inner's; mode() adds the cache.
std::unique_ptr<IoEngine> WrapWithVolatileCache(
    std::unique_ptr<IoEngine> inner, std::shared_ptr<VolatileCache> cache);

}  // namespace pvdisk::io
