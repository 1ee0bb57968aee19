// Fault injection: an engine decorator that fails I/O on a range of sectors
// with -EIO, to test how errors travel up to the application.
#pragma once

#include <memory>

#include "io/engine_factory.h"
#include "io/io_engine.h"

namespace pvdisk::io {

// Returns an engine that behaves like `inner` except that every kRead,
// kWrite, kDiscard and kWriteZeroes overlapping `range` completes with -EIO
// without reaching `inner` (so the image is left untouched). kFlush and
// wake-ups go to `inner`. name() is inner's; mode() is inner's plus a note
// on the range.
std::unique_ptr<IoEngine> WrapWithFaults(std::unique_ptr<IoEngine> inner,
                                         FaultRange range);

}  // namespace pvdisk::io
