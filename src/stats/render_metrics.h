// Rendering of the `metrics` file: the same snapshot as `stats` and
// `stats.json` (render.h) in the Prometheus text exposition format (version
// 0.0.4, which OpenMetrics scrapers and node_exporter's textfile collector
// read), one sample per queue, labelled disk="NAME",queue="Q".
//
// Names: where node_exporter's diskstats collector has a metric for the
// same quantity, its name with the prefix pvdisk_disk_ (e.g.
// pvdisk_disk_reads_completed_total), in its unit (bytes, seconds); every
// other counter of counters.h as pvdisk_NAME_total (kCount, a Prometheus
// counter) or pvdisk_NAME (kGauge and kMax, a Prometheus gauge), with the
// counter's meaning as HELP. The latency histograms become Prometheus
// histograms in seconds (pvdisk_read_latency_seconds and
// pvdisk_write_latency_seconds).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stats/render.h"

namespace pvdisk::stats {

// How one counter of counters.h appears in `metrics`.
struct MetricName {
  std::string name;  // e.g. "pvdisk_disk_read_bytes_total"
  // The unit conversion: the value is multiplied by `scale` (512 for
  // sectors to bytes) or, with `nanoseconds_to_seconds`, written as
  // seconds (value / 1e9, exactly, as a decimal).
  uint64_t scale = 1;
  bool nanoseconds_to_seconds = false;
  bool counter = true;  // TYPE counter, else gauge
};

// The metric that carries counter `c`.
MetricName MetricFor(Counter c);

// The upper bounds (in ns, inclusive) of the histograms' `le` buckets: for
// each of 1, 2, 5 us, ... 10 s, the upper bound of the LatencyHistogram
// bucket that holds it, so that each `le` count is exact (a bucket is never
// split), and `le` is at most 0.8% above the round value.
std::vector<uint64_t> MetricBucketBounds();

// `nanoseconds` as seconds in decimal, exactly: "0.000012345", "3", "1.5".
std::string SecondsText(uint64_t nanoseconds);

// The whole file.
std::string RenderMetrics(const std::vector<DiskReport>& disks);

}  // namespace pvdisk::stats
