// Where the transport records the steps of a request into its queue's trace
// (trace/queue_trace.h). Each call is one predictable branch while tracing
// is off; the event is built only when it is on.
#pragma once

#include <cstdint>

#include "trace/event.h"
#include "trace/queue_trace.h"
#include "transport/block_io.h"

namespace pvdisk::transport {

// `io`: the piece's BlockIo (null for a ring request's own steps);
// `ring_id`: the ring request's id, or trace::kNoRingId.
inline void TracePoint(trace::QueueTrace* trace, trace::TraceAction action,
                       BlockOp op, uint64_t sector, uint64_t num_sectors,
                       const BlockIo* io, uint32_t ring_id = trace::kNoRingId,
                       uint8_t flags = 0) {
  if (__builtin_expect(!trace->on(), 1)) return;
  trace::TraceEvent event;
  event.action = action;
  event.flags = static_cast<uint8_t>(static_cast<uint8_t>(op) | flags);
  event.sector = sector;
  bool has_data = op != BlockOp::kFlush;
  event.bytes = has_data ? static_cast<uint32_t>(num_sectors * kSectorSize) : 0;
  event.io = reinterpret_cast<uintptr_t>(io);
  event.ring_id = ring_id;
  trace->Record(event);
}

// An instant of the queue's own (a kick, an interrupt).
inline void TraceInstant(trace::QueueTrace* trace, trace::TraceAction action) {
  if (__builtin_expect(!trace->on(), 1)) return;
  trace::TraceEvent event;
  event.action = action;
  trace->Record(event);
}

}  // namespace pvdisk::transport
