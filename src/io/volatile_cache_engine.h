// The engine decorator of a disk with a volatile write cache
// (io/volatile_cache.h): writes are held in the disk's cache and complete
// at once, flushes have the cache written out (a FLUSH completes when the
// cache's write-out thread is done with it, without holding up the
// engine's thread where the inner engine can watch an eventfd; on a
// borrowed ring it waits on that thread), reads are overlaid with what is
// held, and after a power cut every request fails with -EIO. It sits right
// over the file engine, under every other decorator (faults, delay), where
// a disk's own cache is.
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
