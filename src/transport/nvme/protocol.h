// NVMe I/O queue pairs as a pvdisk frontend ("--frontend nvme").
#pragma once

#include "transport/protocol.h"

namespace pvdisk::transport {

const Protocol& NvmeProtocol();

}  // namespace pvdisk::transport
