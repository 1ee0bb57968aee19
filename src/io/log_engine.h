// The engine decorator of a disk with a write log (`--disk IMG,log=FILE`;
// write_log.h): every write, discard, write of zeros and flush that
// completes successfully is appended to the log when its completion passes
// through, before the caller sees it, so the log holds them in completion
// order. A flush's entry thus follows every write that completed before the
// flush was issued (and any that completed while it was in flight: a
// state the disk may also be in after a power cut). Failed requests are not
// logged. It sits over every other decorator (cache, faults, delay): it
// records what the guest was told, in the order it was told.
//
// There is no FUA: FUSE has none, and a write with O_SYNC or O_DSYNC
// semantics arrives as a write and a flush, logged as such.
#pragma once

#include <memory>

#include "io/io_engine.h"
#include "io/write_log.h"

namespace pvdisk::io {

// Wraps `inner` with `log`, shared by every engine of the disk. name() is
// inner's; mode() adds the log.
std::unique_ptr<IoEngine> WrapWithWriteLog(std::unique_ptr<IoEngine> inner,
                                           std::shared_ptr<WriteLog> log);

}  // namespace pvdisk::io
