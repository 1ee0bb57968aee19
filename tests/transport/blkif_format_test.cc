#include <cstddef>

#include "gtest/gtest.h"
#include "transport/blkif/format.h"

namespace pvdisk::transport::blkif {
namespace {

TEST(BlkifFormatTest, RingBytesRoundsUpToPages) {
  EXPECT_EQ(RingBytes(1), 4096u);
  // 64 + 32 * 112 = 3648: one page, like Xen's single-page ring.
  EXPECT_EQ(RingBytes(32), 4096u);
  EXPECT_EQ(RingBytes(36), 4096u);  // 64 + 36 * 112 = 4096 exactly
  EXPECT_EQ(RingBytes(37), 8192u);
  EXPECT_EQ(RingBytes(64), 8192u);      // 7232
  EXPECT_EQ(RingBytes(256), 32768u);    // 28736
  EXPECT_EQ(RingBytes(4096), 462848u);  // 458816 -> 113 pages
}

TEST(BlkifFormatTest, LayoutConstants) {
  EXPECT_EQ(kSectorsPerPage, 8u);
  EXPECT_EQ(offsetof(Response, status), 10u);
  EXPECT_EQ(offsetof(DiscardRequest, nr_sectors), 24u);
  EXPECT_EQ(offsetof(SharedRingHeader, rsp_event), 12u);
  EXPECT_EQ(offsetof(Request, seg) + kMaxDirectSegments * sizeof(Segment),
            sizeof(Slot));
}

}  // namespace
}  // namespace pvdisk::transport::blkif
