// What `pvdisk stat` and `pvdisk list` read about a running mount: which
// mounts are pvdisk's (from /proc/self/mountinfo, without touching them)
// and the daemon's stats.json.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/mount_table.h"
#include "stats/stats_document.h"

namespace pvdisk::cli {

// The pvdisk mount at `path`. InvalidArgument (a usage error) naming the
// path and what it is instead when it does not exist, is not a mount point,
// or is another filesystem's.
absl::StatusOr<MountEntry> RequirePvdiskMount(const std::string& path);

// Every pvdisk mount of this mount namespace, in mount order.
std::vector<MountEntry> AllPvdiskMounts();

// How long ReadMountStats waits for the daemon's answer.
inline constexpr absl::Duration kDaemonAnswerTimeout = absl::Seconds(5);

// Reads and parses MOUNTPOINT/stats.json. Unavailable when the daemon does
// not answer: it died and left the mount behind (ENOTCONN), or it is alive
// but gives no answer within `timeout` (stopped, or hung). The read runs in
// a child process, which is left behind if the daemon never answers (see
// mount_stats.cc): the caller goes on after `timeout` and can exit.
absl::StatusOr<stats::StatsDocument> ReadMountStats(
    const std::string& mountpoint,
    absl::Duration timeout = kDaemonAnswerTimeout);

// Writes `command` (one line, ending in a newline) to MOUNTPOINT/stats,
// where the daemon carries it out (reset, powercut, mark). Unavailable
// "cannot open PATH: ..." when the file cannot be opened; else OK once the
// daemon took the command, or the errno it refused the write with, as
// "<refused>: <strerror> (its log says why)".
absl::Status SendStatsCommand(const std::string& mountpoint,
                              std::string_view command,
                              std::string_view refused);

}  // namespace pvdisk::cli
