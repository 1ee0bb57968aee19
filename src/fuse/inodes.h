// The fixed inode numbers of the mount's flat directory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fuse/protocol/abi.h"

namespace pvdisk::fuse {

inline constexpr uint64_t kRootInode = abi::kRootId;  // 1
inline constexpr uint64_t kStatsInode = 2;
inline constexpr uint64_t kStatsJsonInode = 3;
inline constexpr uint64_t kMetricsInode = 4;
inline constexpr uint64_t kTraceInode = 5;    // hidden: trace/trace_control.h
inline constexpr uint64_t kControlInode = 6;  // hidden: disk_control.h
inline constexpr uint64_t kFirstDiskInode = 16;

inline constexpr const char* kStatsName = "stats";
inline constexpr const char* kStatsJsonName = "stats.json";
inline constexpr const char* kMetricsName = "metrics";

inline uint64_t DiskInode(size_t index) { return kFirstDiskInode + index; }

}  // namespace pvdisk::fuse
