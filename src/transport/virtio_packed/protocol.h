// virtio-blk on a packed virtqueue as a pvdisk frontend
// ("--frontend virtio-packed").
#pragma once

#include "transport/protocol.h"

namespace pvdisk::transport {

const Protocol& VirtioPackedProtocol();

}  // namespace pvdisk::transport
