// The rows of `pvdisk stat`: rates over an interval from two snapshots of
// the same queue (or disk total), in iostat -x's column names where one
// exists, then pvdisk's own. Kept apart from the command so that the
// arithmetic is tested on its own.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "stats/queue_stats.h"

namespace pvdisk::stats {

struct IostatColumn {
  const char* name;
  int decimals;  // in the text view
  const char* meaning;
};

// Every column, in order. Sizes are KiB and MiB (as iostat's kB and MB),
// times are milliseconds, as iostat's.
inline constexpr IostatColumn kIostatColumns[] = {
    {"r/s", 2, "read requests put on the ring per second"},
    {"w/s", 2, "write requests put on the ring per second"},
    {"rMB/s", 2, "MiB read per second"},
    {"wMB/s", 2, "MiB written per second"},
    {"rrqm/s", 2, "read requests merged per second"},
    {"wrqm/s", 2, "write requests merged per second"},
    {"%rrqm", 2, "share of read requests merged before the ring"},
    {"%wrqm", 2, "share of write requests merged before the ring"},
    {"rareq-sz", 2, "average ring read request size, KiB"},
    {"wareq-sz", 2, "average ring write request size, KiB"},
    {"r_await", 3, "average FUSE READ latency, arrival to reply, ms"},
    {"w_await", 3, "average FUSE WRITE latency, arrival to reply, ms"},
    {"aqu-sz", 2,
     "average ring requests in flight (time-integral of inflight "
     "over the interval)"},
    {"ring/req", 2, "ring requests per FUSE READ or WRITE"},
    {"kicks/req", 2, "frontend-to-backend notifications per ring request"},
    {"irqs/req", 2, "backend-to-frontend notifications per ring request"},
    {"ring_full/s", 2, "requests per second that waited for a full ring"},
    {"splits/s", 2, "extra ring requests per second from splitting"},
    {"errors", 0, "ring requests that failed in the interval"},
    {"invalid", 0, "ring requests rejected by validation in the interval"},
    {"refused", 0,
     "writes refused in the interval for putting an image header into "
     "sector 0"},
    {"r_p99", 3, "99th percentile FUSE READ latency in the interval, ms"},
    {"w_p99", 3, "99th percentile FUSE WRITE latency in the interval, ms"},
    {"unsafe_MB", 2,
     "cache=volatile: MiB of completed writes no flush covers yet, at the "
     "end of the interval"},
    {"unsafe_maxMB", 2,
     "cache=volatile: the highest unsafe_MB since the mount or reset"},
    {"wout/s", 2, "cache=volatile: write-outs of the cache per second"},
    {"full/s", 2,
     "cache=volatile: write-outs per second started by a half-full cache"},
    {"fwait/s", 2,
     "cache=volatile: writes per second that waited for a write-out"},
};

inline constexpr size_t kNumIostatColumns = std::size(kIostatColumns);

// The values of one row, in kIostatColumns order: what happened between
// `before` and `after`, `interval_ns` apart. Counts that went down (a
// reset in between) count from zero. A ratio with nothing to divide by is 0.
std::vector<double> IostatRow(const QueueSnapshot& before,
                              const QueueSnapshot& after, uint64_t interval_ns);

}  // namespace pvdisk::stats
