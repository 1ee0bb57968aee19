// The checks of a mount's --disk list before anything is mounted: each
// image exists and is outside the mountpoint, none is given twice, each
// gets a file name in the mount that is neither the stats file's nor
// another disk's, and each opens (through the image layer, for its virtual
// size) and fits what its --disk argument expects (CheckDiskSpec). An rbd:
// disk is checked as far as it can be without the cluster (which only the
// daemon reaches: librados does not survive fork): its conf= exists.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fuse/disk.h"

namespace pvdisk::fuse {

struct CheckedDisks {
  // As given, with paths (and an rbd: disk's conf=) made absolute: the
  // daemon changes to /.
  std::vector<DiskSpec> disks;
  std::vector<std::string> names;  // each disk's file name in the mount
};

// `specs` as parsed from the --disk arguments, for a mount at `mountpoint`
// (absolute). Refuses with one line naming the disk and what is wrong.
absl::StatusOr<CheckedDisks> CheckDiskList(std::vector<DiskSpec> specs,
                                           const std::string& mountpoint);

}  // namespace pvdisk::fuse
