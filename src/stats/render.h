// Rendering of the stats file (`stats`, a text table) and `stats.json`.
#pragma once

#include <string>
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

// The text table: per disk, a "# disk ..." comment line with the
// configuration, a header row, one row per queue and a "total" row. Columns
// are "disk", "queue", every counter of counters.h, then lat_us_p50 and
// lat_us_p99.
std::string RenderText(const std::vector<DiskReport>& disks);

// {"disks": [{"name": ..., "config": {...}, "queues": [{"queue": 0,
// <counters>},
// ...], "total": {<counters>}}]} with the same names as the table.
std::string RenderJson(const std::vector<DiskReport>& disks);

}  // namespace pvdisk::stats
