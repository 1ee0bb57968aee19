// Rendering of the stats file (`stats`, a text table) and `stats.json`.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stats/queue_stats.h"

namespace pvdisk::stats {

// What the stats file shows for one disk.
struct DiskReport {
  std::string name;  // the file name in the mount, e.g. "disk0.img"
  // Configuration in display order, e.g. {"frontend", "blkif"}. Values that
  // are canonical whole numbers ("256", not "0256") are written to JSON as
  // numbers, everything else as strings; paths are absolute, so they stay
  // strings.
  std::vector<std::pair<std::string, std::string>> config;
  std::vector<QueueSnapshot> queues;
};

// `text` as a JSON string literal, quotes included.
std::string JsonString(std::string_view text);

// When a report was taken, for rates: both on the daemon's MonotonicNanos()
// clock (stats/clock.h).
struct ReportClock {
  uint64_t now_ns = 0;    // when the snapshots were taken
  uint64_t since_ns = 0;  // when the counters started: mount or last reset
  int64_t daemon_pid = 0;
};

// The latency columns derived from the histograms, in whole microseconds
// (rounded up, so a non-zero latency never shows as 0): lat_us_p50 and
// lat_us_p99 over both directions, then read_lat_us_pX and write_lat_us_pX
// for X in 50, 90, 99, 99.9.
std::vector<std::string> LatencyColumnNames();

// The text table: per disk, a "# disk ..." comment line with the
// configuration, a header row, one row per queue and a "total" row. Columns
// are "disk", "queue", every counter of counters.h, then the latency
// columns.
std::string RenderText(const std::vector<DiskReport>& disks);

// {"daemon_pid": P, "now_ns": N, "since_ns": S, "disks": [{"name": ...,
// "config": {...}, "queues": [{"queue": 0, <counters>, <histograms>}, ...],
// "total": {<counters>, <histograms>}}]} with the same names as the table.
// <histograms> are "read_latency_ns" and "write_latency_ns": the non-empty
// buckets of LatencyHistogram as [upper bound in ns, count] pairs, in
// ascending order.
std::string RenderJson(const std::vector<DiskReport>& disks,
                       const ReportClock& clock = {});

}  // namespace pvdisk::stats
