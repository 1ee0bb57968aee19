// What `pvdisk stat` and `pvdisk list` read about a running mount: which
// mounts are pvdisk's (from /proc/self/mountinfo, without touching them)
// and the daemon's stats.json.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/mount_table.h"
#include "stats/stats_document.h"

namespace pvdisk::cli {

// The pvdisk mount at `path`. InvalidArgument (a usage error) naming the
// path and what it is instead when it does not exist, is not a mount point,
// or is another filesystem's.
absl::StatusOr<MountEntry> RequirePvdiskMount(const std::string& path);

// Every pvdisk mount of this mount namespace, in mount order.
std::vector<MountEntry> AllPvdiskMounts();

// Reads and parses MOUNTPOINT/stats.json. Unavailable when the daemon does
// not answer (e.g. it died and left the mount behind).
absl::StatusOr<stats::StatsDocument> ReadMountStats(
    const std::string& mountpoint);

}  // namespace pvdisk::cli
