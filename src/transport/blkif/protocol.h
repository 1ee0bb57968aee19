// blkif, Xen's block ring protocol, as a pvdisk frontend ("--frontend blkif").
#pragma once

#include "transport/protocol.h"

namespace pvdisk::transport {

const Protocol& BlkifProtocol();

}  // namespace pvdisk::transport
