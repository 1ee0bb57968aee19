// stats.json read back: what `pvdisk stat` and `pvdisk list` know about a
// mount. The inverse of RenderJson (render.h) for the parts they use.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "stats/queue_stats.h"

namespace pvdisk::stats {

struct DiskDocument {
  std::string name;
  // The config section, every value as text (numbers in decimal).
  std::map<std::string, std::string> config;
  std::vector<QueueSnapshot> queues;
  QueueSnapshot total;
};

struct StatsDocument {
  int64_t daemon_pid = 0;
  uint64_t now_ns = 0;    // when the daemon took the snapshots
  uint64_t since_ns = 0;  // when its counters started (mount or reset)
  std::vector<DiskDocument> disks;
};

// Parses the text of a stats.json. Counters missing from a row read as 0
// (an older daemon); text that is not stats.json is InvalidArgument.
absl::StatusOr<StatsDocument> ParseStatsDocument(std::string_view text);

}  // namespace pvdisk::stats
