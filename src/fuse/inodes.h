// The fixed inode numbers of the mount's flat directory.
#pragma once

#include <fuse_lowlevel.h>

#include <cstddef>

namespace pvdisk::fuse {

inline constexpr fuse_ino_t kRootInode = FUSE_ROOT_ID;  // 1
inline constexpr fuse_ino_t kStatsInode = 2;
inline constexpr fuse_ino_t kStatsJsonInode = 3;
inline constexpr fuse_ino_t kFirstDiskInode = 16;

inline constexpr const char* kStatsName = "stats";
inline constexpr const char* kStatsJsonName = "stats.json";

inline fuse_ino_t DiskInode(size_t index) { return kFirstDiskInode + index; }

}  // namespace pvdisk::fuse
