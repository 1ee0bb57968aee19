// The names and kinds of the per-queue counters. The same names are the
// columns of the `stats` table and the keys of `stats.json` (docs/reference.md
// lists them for users). A counter is listed here only once something in the
// data path really measures it.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace pvdisk::stats {

// How a counter behaves and how the total row combines the queues' values.
enum class CounterKind {
  kCount,  // only grows; reset zeroes it; total = sum
  kGauge,  // goes up and down (e.g. in flight now); reset keeps it; total = sum
  kMax,    // highest value seen; reset restarts it; total = max over queues
};

// X(name, kind, meaning)
#define PVDISK_QUEUE_COUNTERS(X)                                               \
  X(fuse_reads, kCount, "FUSE READ requests received")                         \
  X(fuse_writes, kCount, "FUSE WRITE requests received")                       \
  X(reads_done, kCount, "FUSE READ requests answered (data or error)")         \
  X(writes_done, kCount, "FUSE WRITE requests answered (done or error)")       \
  X(read_lat_ns, kCount,                                                       \
    "sum of the answered READs' latencies, arrival to reply, in ns")           \
  X(write_lat_ns, kCount,                                                      \
    "sum of the answered WRITEs' latencies, arrival to reply, in ns")          \
  X(reqs_read, kCount, "read requests on the ring")                            \
  X(reqs_write, kCount, "write requests on the ring")                          \
  X(reqs_flush, kCount, "flush requests on the ring")                          \
  X(reqs_discard, kCount, "discard and write-zeroes requests on the ring")     \
  X(sectors_read, kCount, "512-byte sectors read by ring requests")            \
  X(sectors_written, kCount, "512-byte sectors written by ring requests")      \
  X(segments, kCount, "data segments carried by ring requests")                \
  X(indirect_reqs, kCount,                                                     \
    "ring requests whose segments were in indirect pages")                     \
  X(merges_read, kCount, "read requests merged into another before the ring")  \
  X(merges_write, kCount,                                                      \
    "write requests merged into another before the ring")                      \
  X(splits, kCount, "extra ring requests made by splitting large requests")    \
  X(ring_full, kCount,                                                         \
    "requests that waited because the ring or pool was full")                  \
  X(dispatch_busy, kCount, "dispatch attempts the full ring refused")          \
  X(plugs, kCount, "requests held back by --plug-us so that they could merge") \
  X(inflight, kGauge, "ring requests pushed and not yet answered")             \
  X(inflight_max, kMax, "highest inflight seen")                               \
  X(inflight_ns, kCount,                                                       \
    "time-integral of inflight in ns: each answered ring request adds the "    \
    "time it spent on the ring")                                               \
  X(engine_inflight_max, kMax,                                                 \
    "highest number of I/Os in flight at the engine")                          \
  X(kicks_sent, kCount, "frontend-to-backend notifications sent")              \
  X(kicks_suppressed, kCount, "request pushes that needed no notification")    \
  X(irqs_sent, kCount, "backend-to-frontend notifications sent")               \
  X(irqs_suppressed, kCount, "response pushes that needed no notification")    \
  X(irqs_coalesced, kCount,                                                    \
    "of irqs_suppressed, those held back by --irq-coalesce")                   \
  X(final_check_again, kCount, "final checks before sleeping that found work") \
  X(polls_hit, kCount, "polls (--poll-us) that found work before sleeping")    \
  X(grant_maps, kCount, "data pages mapped per request (--persistent off)")    \
  X(grant_unmaps, kCount,                                                      \
    "data pages unmapped per request (--persistent off)")                      \
  X(errors, kCount, "ring requests that failed with an I/O error")             \
  X(invalid_reqs, kCount, "ring requests rejected by validation")              \
  X(refused_header_writes, kCount,                                             \
    "writes refused with EPERM for putting an image header into sector 0 "     \
    "of a disk whose raw format was probed")                                   \
  X(zero_copy_ios, kCount,                                                     \
    "reads and writes carried on the FUSE payload's own pages (no copy)")      \
  X(bounced_reqs, kCount,                                                      \
    "requests with more iovecs than the engine takes, served via a copy")      \
  X(engine_restarts, kCount,                                                   \
    "times the backend replaced an engine that failed as a whole")             \
  X(backend_restarts, kCount,                                                  \
    "times a new backend process replaced one that died (--backend process)")  \
  X(reissued_reqs, kCount,                                                     \
    "ring requests written again for a new backend after one died")           \
  X(l2_hits, kCount, "qcow2: L2 entries found in the L2 cache")               \
  X(l2_misses, kCount, "qcow2: L2 tables read because the cache lacked them") \
  X(meta_reads, kCount, "qcow2: metadata tables read from the image's files") \
  X(meta_writes, kCount, "qcow2: metadata writes to the image's top file")    \
  X(clusters_allocated, kCount, "qcow2: data clusters allocated by writes")   \
  X(cow_bytes, kCount,                                                         \
    "qcow2: bytes copied into newly allocated clusters (backing data or "      \
    "zeros a write did not cover)")                                            \
  X(compressed_reads, kCount,                                                  \
    "qcow2: compressed clusters inflated to serve reads")                      \
  X(unsafe_bytes, kGauge,                                                      \
    "cache=volatile: bytes of completed writes no flush covers yet (lost "     \
    "if the power is cut now)")                                                \
  X(unsafe_bytes_max, kMax, "cache=volatile: highest unsafe_bytes seen")       \
  X(flushes, kCount,                                                           \
    "cache=volatile: write-outs of the cache made durable (flushes and "       \
    "full_flushes)")                                                           \
  X(full_flushes, kCount,                                                      \
    "cache=volatile: write-outs started by a write that found half the "       \
    "cache held")                                                              \
  X(full_waits, kCount,                                                        \
    "cache=volatile: writes that found the cache full and waited for the "     \
    "write-out under way")                                                     \
  X(log_entries, kCount, "log=: entries appended to the write log")            \
  X(log_bytes, kCount, "log=: bytes appended to the write log")

enum class Counter : int {
#define PVDISK_COUNTER_ENUM(name, kind, meaning) name,
  PVDISK_QUEUE_COUNTERS(PVDISK_COUNTER_ENUM)
#undef PVDISK_COUNTER_ENUM
};

struct CounterInfo {
  std::string_view name;
  CounterKind kind;
  std::string_view meaning;
};

inline constexpr CounterInfo kCounterInfo[] = {
#define PVDISK_COUNTER_INFO(name, kind, meaning) \
  {#name, CounterKind::kind, meaning},
    PVDISK_QUEUE_COUNTERS(PVDISK_COUNTER_INFO)
#undef PVDISK_COUNTER_INFO
};

inline constexpr size_t kNumCounters = std::size(kCounterInfo);

// Values of all counters of one queue (or of a total), indexed by Counter.
using CounterValues = std::array<uint64_t, kNumCounters>;

constexpr size_t Index(Counter c) { return static_cast<size_t>(c); }

}  // namespace pvdisk::stats
