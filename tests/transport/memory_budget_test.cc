// The memory budget's computation against what Queue::Create really
// allocates, for both ring protocols and a spread of ring sizes and segment
// counts, and the budget check's refusal.
#include "transport/memory_budget.h"

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "transport/blkif/protocol.h"
#include "transport/nvme/protocol.h"
#include "transport/queue.h"
#include "transport/virtio/protocol.h"
#include "transport/virtio_packed/protocol.h"

namespace pvdisk::transport {
namespace {

TEST(MemoryBudgetTest, QueueRegionIsWhatTheBudgetComputes) {
  for (const Protocol* protocol : {&BlkifProtocol(), &VirtioProtocol(),
                                   &VirtioPackedProtocol(), &NvmeProtocol()}) {
    for (uint32_t ring_size : {32u, 256u, 1024u}) {
      for (uint32_t segments : {11u, 64u, 256u, 1024u}) {
        QueueOptions options;
        options.name = "pvdisk-budget-test";
        options.protocol = protocol;
        options.ring_size = ring_size;
        options.max_segments = segments;
        options.disk_sectors = 2048;
        absl::StatusOr<std::unique_ptr<Queue>> queue = Queue::Create(options);
        ASSERT_TRUE(queue.ok()) << queue.status();
        QueueMemory memory = QueueMemoryOf(options);
        EXPECT_EQ((*queue)->region_bytes(), memory.region_bytes)
            << protocol->name() << " ring " << ring_size << " segments "
            << segments;
        EXPECT_EQ((*queue)->pool_pages(), memory.pool_pages);
        EXPECT_EQ(
            memory.region_bytes,
            memory.ring_bytes +
                (uint64_t{memory.pool_pages} + memory.table_pages) * 4096);
      }
    }
  }
}

TEST(MemoryBudgetTest, TransportNeedGrowsWithQueuesAndThreads) {
  TransportOptions options;
  options.queues = 4;
  options.backend_threads = 1;
  TransportMemory one_thread = TransportMemoryOf(options, true);
  EXPECT_EQ(one_thread.shared_bytes,
            4 * QueueMemoryOf(options.queue).region_bytes);
  EXPECT_GT(one_thread.engine_bytes, 0u);
  EXPECT_EQ(TransportMemoryOf(options, false).engine_bytes, 0u);
  options.backend_threads = 4;
  TransportMemory four_threads = TransportMemoryOf(options, true);
  EXPECT_EQ(four_threads.shared_bytes, one_thread.shared_bytes);
  EXPECT_GT(four_threads.engine_bytes, one_thread.engine_bytes);
}

TEST(MemoryBudgetTest, RefusalGivesTheSizeAndTheFlags) {
  TransportOptions options;
  options.queue.protocol = &VirtioProtocol();
  options.queues = 64;
  options.queue.ring_size = 32768;
  options.queue.max_segments = 4096;
  uint64_t need = TransportMemoryOf(options, true).total();
  EXPECT_GT(need, uint64_t{200} << 30);
  EXPECT_TRUE(CheckMemoryBudget(options, true, 1, need).ok());
  absl::Status refused = CheckMemoryBudget(options, true, 1, need - 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  std::string message(refused.message());
  EXPECT_NE(message.find(absl::StrCat("(", need, " bytes)")), std::string::npos)
      << message;
  for (const char* part : {"--queues 64", "--ring-size 32768",
                           "--max-segments 4096", "--max-memory"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << ": " << message;
  }
  // Two disks need twice as much.
  EXPECT_FALSE(CheckMemoryBudget(options, true, 2, 2 * need - 1).ok());
  EXPECT_TRUE(CheckMemoryBudget(options, true, 2, 2 * need).ok());
}

TEST(MemoryBudgetTest, DefaultIsAQuarterOfRam) {
  uint64_t ram = uint64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  EXPECT_EQ(DefaultMemoryBudget(), ram / 4);
}

}  // namespace
}  // namespace pvdisk::transport
