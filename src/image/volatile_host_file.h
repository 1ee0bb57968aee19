// A qcow2 HostFile (qcow2/host_file.h) over a disk's volatile write cache
// (io/volatile_cache.h, cache=volatile): the format's own metadata follows
// the model its data follows. A write is held in the cache like a data
// write of the engines (one cache, one completion order for both), a read
// is the file's bytes overlaid with what the cache holds, and a sync is a
// FLUSH of the cache (written out, then fdatasync). So the metadata
// journal's barriers, which are syncs, order its stages on the medium as
// they do without the cache, and a power cut keeps none, all or a random
// subset of the held metadata writes as it does of the data writes. After
// the cut every call fails with EIO.
#pragma once

#include <memory>
#include <string>

#include "image/qcow2/host_file.h"
#include "io/volatile_cache.h"

namespace pvdisk::image {

// `fd` is the file `cache` holds writes of (borrowed; open while the
// HostFile is used), opened without O_DIRECT: metadata writes are not
// sector-aligned. Errors name `name`.
std::unique_ptr<qcow2::HostFile> MakeVolatileHostFile(
    std::shared_ptr<io::VolatileCache> cache, int fd, std::string name);

}  // namespace pvdisk::image
