// Qcow2Engine: the engine of a qcow2 disk, a decorator over an engine of
// the chain's files (top first; IoRequest::file is the layer). It maps each
// virtual request through the shared Qcow2State into I/Os on the files and
// completes the request with the last of them:
// - a request is cut at the top layer's cluster boundaries, and each piece
//   mapped: a data cluster is read (or, writable in place, written) at its
//   host offset in file 0; a zero cluster reads as zeros; an unallocated one
//   from the next layer (a qcow2 layer mapped in its own metadata, a raw
//   layer at the same offset), zeros past a layer's size and below the last
//   layer; a compressed cluster or an entry the metadata refuses fails the
//   request with -EIO;
// - a write that needs a cluster allocated, a discard and a write of zeroes
//   are done by the state's metadata steps (qcow2_state.h) before Queue()
//   returns, and complete in the next Run();
// - kFlush is a flush of the top file: every completed write's metadata is
//   written by then, so it makes them durable too.
// The pieces of one request are in flight together. When they need more
// I/Os than the inner engine has room for, the rest wait in the engine's
// own backlog and are issued as room frees: a request Queue() accepted is
// never refused later.
#pragma once

#include <cstdint>
#include <memory>

#include "image/qcow2_state.h"
#include "io/io_engine.h"

namespace pvdisk::image {

// `inner` is an engine over the chain's files with room for `capacity`
// I/Os (depth + extra_ios); the engine takes up to `depth` requests.
// `state` must outlive it.
std::unique_ptr<io::IoEngine> MakeQcow2Engine(
    std::unique_ptr<io::IoEngine> inner, Qcow2State& state, uint32_t depth,
    uint32_t capacity);

}  // namespace pvdisk::image
