// How much memory a transport configuration needs, computed before anything
// is created, so that a mount can be refused while nothing exists yet.
//
// QueueMemoryOf() is the one place that sizes a queue's shared region:
// Queue::Create() allocates exactly what it says, so the budget check and the
// allocation cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "transport/queue.h"
#include "transport/transport.h"

namespace pvdisk::transport {

// The layout of one queue's shared region (memfd): the ring, then the data
// pool, then each ring id's table pages (indirect pages, descriptor tables).
struct QueueMemory {
  size_t ring_bytes = 0;     // the protocol's ring, a multiple of 4096
  uint32_t pool_pages = 0;   // data pages handed out by the PagePool
  uint32_t table_pages = 0;  // ring_size x table pages per request
  uint32_t table_pages_per_request = 0;
  // ring_bytes + (pool_pages + table_pages) * 4096: the memfd's size.
  size_t region_bytes = 0;
};

// REQUIRES: ValidateQueueOptions(options) is ok.
QueueMemory QueueMemoryOf(const QueueOptions& options);

// What one disk's transport needs.
struct TransportMemory {
  // Every queue's shared region (what `shared_bytes=` in the stats header
  // shows once it exists).
  uint64_t shared_bytes = 0;
  // The kernel's io_uring rings of the backend threads (submission and
  // completion entries), an upper estimate; 0 for engines without a ring.
  uint64_t engine_bytes = 0;
  uint64_t total() const { return shared_bytes + engine_bytes; }
};

// REQUIRES: ValidateTransportOptions(options) is ok. `uses_uring`: whether
// each backend thread gets an io_uring (--engine uring).
TransportMemory TransportMemoryOf(const TransportOptions& options,
                                  bool uses_uring);

// A quarter of the machine's RAM: the default of --max-memory.
uint64_t DefaultMemoryBudget();

// Ok if `disks` disks of this configuration fit in `budget` bytes; else
// InvalidArgument with one line giving the computed size, the budget and the
// flags that drive the size.
absl::Status CheckMemoryBudget(const TransportOptions& options, bool uses_uring,
                               uint32_t disks, uint64_t budget);

}  // namespace pvdisk::transport
