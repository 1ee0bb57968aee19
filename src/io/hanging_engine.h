// Test-only fault: an engine decorator whose I/O on one sector never
// completes, as an image on a hung NFS server or a stuck RBD cluster never
// answers. It exists to test that shutdown gives up on such I/O after
// --shutdown-timeout instead of waiting forever.
//
// It is reached only through the environment, never through pvdisk's
// documented interface: PVDISK_TEST_FAULT=hang=SECTOR (see test_fault.h)
// makes every engine the process creates hold each read, write, discard or
// write-zeroes that touches SECTOR forever. Flushes and every other request
// pass through.
#pragma once

#include <cstdint>
#include <memory>

#include "io/io_engine.h"

namespace pvdisk::io {

// Returns an engine that behaves like `inner` except that a kRead, kWrite,
// kDiscard or kWriteZeroes touching `sector` is accepted and never completes
// (it counts in inflight() forever; its buffers are never touched).
// Destroying the engine forgets the held requests.
std::unique_ptr<IoEngine> WrapWithHang(std::unique_ptr<IoEngine> inner,
                                       uint64_t sector);

}  // namespace pvdisk::io
