// Discard and write-zeroes ranges longer than a ring request can carry:
// virtio-blk's DiscardSegment and NVMe's DSM range hold 32 bits of sectors
// (NVMe's Write Zeroes 16), so the FrontendQueue splits a longer range at the
// protocol's MaxRangeSectors (counted as `splits`); blkif's 64-bit nr_sectors
// takes any range whole. Ranges just below, at and above 2^32 sectors, on a
// sparse 3 TiB image.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "stats/counters.h"
#include "transport/blkif/protocol.h"
#include "transport/block_io.h"
#include "transport/nvme/format.h"
#include "transport/nvme/protocol.h"
#include "transport/virtio/format.h"
#include "transport/virtio/protocol.h"
#include "transport/virtio_packed/protocol.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;

constexpr uint64_t kTwoToThe32 = uint64_t{1} << 32;
constexpr uint64_t kDiskSectors = uint64_t{3} << 31;  // 3 TiB
// Range lengths, in sectors, around 2^32 (2 TiB), and the whole disk.
const std::vector<uint64_t>& Lengths() {
  static const std::vector<uint64_t> lengths = {kTwoToThe32 - 8, kTwoToThe32,
                                                kTwoToThe32 + 8, kDiskSectors};
  return lengths;
}

// Ring requests a range of `sectors` takes under `protocol`.
uint64_t PiecesFor(const Protocol* protocol, BlockOp op, uint64_t sectors) {
  if (protocol == &BlkifProtocol()) return 1;
  uint64_t limit = op == BlockOp::kDiscard ? virtio::kMaxDiscardSectors
                                           : virtio::kMaxWriteZeroesSectors;
  // NVMe: Dataset Management's 32-bit count as virtio's; Write Zeroes'
  // 16-bit one.
  if (protocol == &NvmeProtocol() && op == BlockOp::kWriteZeroes) {
    limit = nvme::kMaxBlocksPerCommand;
  }
  return (sectors + limit - 1) / limit;
}

class RangeSplitTest : public testing::TransportFixture,
                       public ::testing::WithParamInterface<const Protocol*> {
 protected:
  // Grows the fixture's image to 3 TiB (sparse) and starts one queue.
  void StartOnBigImage(io::EngineKind engine) {
    ASSERT_EQ(truncate(path_.c_str(), kDiskSectors * 512), 0);
    TransportConfig config;
    config.engine = engine;
    config.protocol = GetParam();
    StartTransport(config);
  }
};

// Real discards (hole punches) through the sync engine: a pattern written
// just inside and just past each range's end, and at 2 TiB, reads back as
// zeros inside the range and intact past it. A virtio request that kept
// only the low 32 bits of the length would punch 1 TiB of a 3 TiB range and
// report success, and turn a range of exactly 2^32 sectors into 0 sectors
// and EIO.
TEST_P(RangeSplitTest, DiscardAroundTwoToThe32SectorsPunchesTheWholeRange) {
  StartOnBigImage(io::EngineKind::kSync);
  if (!transport_) return;
  for (uint64_t length : Lengths()) {
    SCOPED_TRACE(::testing::Message() << "discard of " << length << " sectors");
    // 4 KiB blocks: the last inside the range, the first after it (if any),
    // and the one at 2 TiB.
    std::vector<uint64_t> blocks = {length - 8, kTwoToThe32};
    if (length < kDiskSectors) blocks.push_back(length);
    for (uint64_t block : blocks) {
      const std::string data = Pattern(block, 8, 3);
      ASSERT_EQ(Run(BlockOp::kWrite, block, 8, &data)->result, 0);
    }
    const uint64_t splits_before = Get(Counter::splits);
    const uint64_t discards_before = Get(Counter::reqs_discard);
    ASSERT_EQ(Run(BlockOp::kDiscard, 0, length)->result, 0);
    EXPECT_EQ(Get(Counter::reqs_discard) - discards_before,
              PiecesFor(GetParam(), BlockOp::kDiscard, length));
    EXPECT_EQ(Get(Counter::splits) - splits_before,
              PiecesFor(GetParam(), BlockOp::kDiscard, length) - 1);
    for (uint64_t block : blocks) {
      TestIo* read = Run(BlockOp::kRead, block, 8);
      ASSERT_EQ(read->result, 0);
      if (block < length) {
        EXPECT_EQ(read->read_data, std::string(4096, '\0'))
            << "sector " << block << " inside the range was not punched";
      } else {
        EXPECT_EQ(read->read_data, Pattern(block, 8, 3))
            << "sector " << block << " past the range was touched";
      }
    }
  }
  EXPECT_EQ(Get(Counter::errors), 0u);
}

// Write-zeroes of such ranges cannot run on a real image here (zeroing
// terabytes allocates them); the null engine takes them without touching
// the image, so this checks that each range reaches the backend whole, in
// as many valid requests as the protocol needs.
TEST_P(RangeSplitTest, WriteZeroesAroundTwoToThe32SectorsIsSplitAndSucceeds) {
  StartOnBigImage(io::EngineKind::kNull);
  if (!transport_) return;
  for (BlockOp op : {BlockOp::kWriteZeroes, BlockOp::kDiscard}) {
    for (uint64_t length : Lengths()) {
      SCOPED_TRACE(::testing::Message()
                   << (op == BlockOp::kDiscard ? "discard" : "write-zeroes")
                   << " of " << length << " sectors");
      const uint64_t discards_before = Get(Counter::reqs_discard);
      const uint64_t splits_before = Get(Counter::splits);
      EXPECT_EQ(Run(op, 0, length)->result, 0);
      EXPECT_EQ(Get(Counter::reqs_discard) - discards_before,
                PiecesFor(GetParam(), op, length));
      EXPECT_EQ(Get(Counter::splits) - splits_before,
                PiecesFor(GetParam(), op, length) - 1);
    }
  }
  EXPECT_EQ(Get(Counter::errors), 0u);
  EXPECT_EQ(Get(Counter::invalid_reqs), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Protocols, RangeSplitTest,
    ::testing::Values(&BlkifProtocol(), &VirtioProtocol(),
                      &VirtioPackedProtocol(), &NvmeProtocol()),
    [](const ::testing::TestParamInfo<const Protocol*>& info) {
      return testing::ProtocolTestName(info.param);
    });

}  // namespace
}  // namespace pvdisk::transport
