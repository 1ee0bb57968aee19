#include "transport/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pvdisk::transport {
namespace {

constexpr uint64_t kPageBytes = 4096;

// The data pool: on average min(max_segments, 8) pages per ring slot (a
// persistent-grant budget like blkback's, not the worst case of every slot
// carrying a maximal request), and never less than 2048 pages, which holds
// any single BlockIo (up to kMaxBlockIoSectors, split into runs rounded up to
// powers of two) at once, so a large read can always be served.
uint32_t PoolPages(const QueueOptions& options) {
  uint64_t budget =
      uint64_t{options.ring_size} * std::min<uint32_t>(options.max_segments, 8);
  return static_cast<uint32_t>(std::bit_ceil(std::max<uint64_t>(budget, 2048)));
}

// The kernel memory of one io_uring of `depth` requests, as the uring engine
// sizes it (src/io/uring_engine.cc: depth + 16 spare entries rounded up to a
// power of two, at most 32768; a completion queue twice as long): 64-byte
// submission entries plus a 4-byte index each, 16-byte completion entries,
// rounded up to whole pages. An estimate from above: the kernel's ring
// headers are a few cache lines.
uint64_t UringBytes(uint32_t depth) {
  uint64_t entries =
      std::bit_ceil(std::clamp<uint64_t>(uint64_t{depth} + 16, 8, 32768));
  uint64_t bytes = entries * (64 + 4) + 2 * entries * 16 + kPageBytes;
  return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

// "3.1 GiB", "18.1 MiB": one decimal, the largest unit below the size.
std::string Readable(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) {
    return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  }
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

QueueMemory QueueMemoryOf(const QueueOptions& options) {
  const Protocol& protocol = ProtocolOf(options);
  QueueMemory memory;
  memory.ring_bytes = protocol.RingBytes(options.ring_size);
  memory.pool_pages = PoolPages(options);
  memory.table_pages_per_request =
      protocol.TablePagesPerRequest(options.max_segments);
  memory.table_pages = options.ring_size * memory.table_pages_per_request;
  memory.region_bytes =
      memory.ring_bytes +
      (size_t{memory.pool_pages} + memory.table_pages) * kPageBytes;
  return memory;
}

TransportMemory TransportMemoryOf(const TransportOptions& options,
                                  bool uses_uring) {
  TransportMemory memory;
  memory.shared_bytes =
      uint64_t{options.queues} * QueueMemoryOf(options.queue).region_bytes;
  if (uses_uring) {
    // Backend thread t serves queues t, t + M, ...; its engine's depth is
    // the sum of their ring sizes (Transport::Create).
    for (uint32_t t = 0; t < options.backend_threads; ++t) {
      uint32_t served = (options.queues - t + options.backend_threads - 1) /
                        options.backend_threads;
      uint64_t depth = uint64_t{served} * options.queue.ring_size;
      memory.engine_bytes += UringBytes(
          static_cast<uint32_t>(std::min<uint64_t>(depth, UINT32_MAX)));
    }
  }
  return memory;
}

uint64_t DefaultMemoryBudget() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 4;
}

absl::Status CheckMemoryBudget(const TransportOptions& options, bool uses_uring,
                               uint32_t disks, uint64_t budget) {
  TransportMemory one = TransportMemoryOf(options, uses_uring);
  uint64_t engine = one.engine_bytes * disks;
  uint64_t total = one.total() * disks;
  if (total <= budget) return absl::OkStatus();
  const QueueMemory queue = QueueMemoryOf(options.queue);
  return absl::InvalidArgumentError(absl::StrCat(
      "this configuration needs ", Readable(total), " of memory (", total,
      " bytes), above the --max-memory budget of ", Readable(budget), " (",
      budget, " bytes; default a quarter of RAM): ", disks,
      " disk(s) x --queues ", options.queues, " x ",
      Readable(queue.region_bytes),
      " of shared memory per queue (a ring of --ring-size ",
      options.queue.ring_size, " slots, ", queue.pool_pages,
      " data pages = --ring-size x min(--max-segments, 8), ", queue.table_pages,
      " table pages = --ring-size x ", queue.table_pages_per_request,
      " for --max-segments ", options.queue.max_segments, ") + ",
      Readable(engine),
      " of io_uring rings; lower those flags or raise --max-memory"));
}

}  // namespace pvdisk::transport
