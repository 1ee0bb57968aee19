// virtio-blk on a split virtqueue as a pvdisk frontend ("--frontend virtio").
#pragma once

#include "transport/protocol.h"

namespace pvdisk::transport {

const Protocol& VirtioProtocol();

}  // namespace pvdisk::transport
