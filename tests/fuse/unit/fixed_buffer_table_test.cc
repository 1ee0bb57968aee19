// The fixed buffers of a FUSE uring queue thread's ring: engine buffers in
// the first slots, each payload arena entry in a slot of its own,
// registered when an I/O first lands in it and enlarged when one reaches
// further. Checked on a real io_uring: READ_FIXED and WRITE_FIXED through
// the slots it gives move the right bytes between a file and the arena,
// what it refuses (memory outside the arena, a range across two entries,
// a large I/O) it refuses without registering anything, and what the
// kernel refuses turns it off, never an I/O into an error.
#include "fuse/channel/fixed_buffer_table.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "common/thp_mode.h"
#include "fuse/channel/huge_collapser.h"
#include "fuse/channel/payload_arena.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse::channel {
namespace {

constexpr uint32_t kMiB = 1 << 20;
constexpr uint32_t kQueues = 2;
constexpr uint32_t kDepth = 4;

class FixedBufferTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(io_uring_queue_init(8, &ring_, 0), 0) << "io_uring_setup";
    ring_ready_ = true;
    auto arena = PayloadArena::Create(kQueues, kDepth, kMiB);
    ASSERT_TRUE(arena.ok()) << arena.status();
    arena_ = std::move(*arena);
    table_ = std::make_unique<FixedBufferTable>(&ring_, arena_.get());
    // A 2 MiB file whose every byte says where it is.
    file_ = dir_.File("image");
    fd_ = open(file_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd_, 0);
    contents_.resize(2 * kMiB);
    for (size_t i = 0; i < contents_.size(); ++i) {
      contents_[i] = static_cast<uint8_t>(i * 7 + i / 4096);
    }
    ASSERT_EQ(pwrite(fd_, contents_.data(), contents_.size(), 0),
              static_cast<ssize_t>(contents_.size()));
  }
  void TearDown() override {
    table_.reset();
    if (ring_ready_) io_uring_queue_exit(&ring_);
    if (fd_ >= 0) close(fd_);
  }

  uint8_t* Entry(uint32_t queue, uint32_t entry) {
    return arena_->QueueBase(queue) + size_t{entry} * kMiB;
  }

  // One READ_FIXED (or WRITE_FIXED) of `bytes` at `offset` into (from)
  // `data` through fixed buffer `index`; its result.
  int Transfer(bool read, uint8_t* data, unsigned bytes, uint64_t offset,
               int index) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return -EBUSY;
    if (read) {
      io_uring_prep_read_fixed(sqe, fd_, data, bytes, offset, index);
    } else {
      io_uring_prep_write_fixed(sqe, fd_, data, bytes, offset, index);
    }
    int rc = io_uring_submit(&ring_);
    if (rc != 1) return rc < 0 ? rc : -EIO;
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc < 0) return rc;
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return res;
  }

  pvdisk::testing::TempDir dir_;
  io_uring ring_;
  bool ring_ready_ = false;
  std::unique_ptr<PayloadArena> arena_;
  std::unique_ptr<FixedBufferTable> table_;
  std::string file_;
  int fd_ = -1;
  std::vector<uint8_t> contents_;
};

TEST_F(FixedBufferTableTest, EachEntryHasItsOwnSlotAfterTheEngineSlots) {
  const int first = table_->ForPayload(Entry(0, 0), 4096);
  const int last = table_->ForPayload(Entry(kQueues - 1, kDepth - 1), 4096);
  ASSERT_GE(first, 0);
  EXPECT_EQ(first, static_cast<int>(FixedBufferTable::kEngineSlots));
  EXPECT_EQ(last, first + static_cast<int>(kQueues * kDepth - 1));
  // Within what is registered: the same slot, nothing registered again.
  EXPECT_EQ(table_->ForPayload(Entry(0, 0) + 1024, 2048), first);
  EXPECT_EQ(table_->payload_registrations(), 2u);
  // Further into the entry: still its slot, registered further.
  EXPECT_EQ(table_->ForPayload(Entry(0, 0) + 8192, 4096), first);
  EXPECT_EQ(table_->payload_registrations(), 3u);
}

TEST_F(FixedBufferTableTest, ReadFixedLandsTheFileInTheEntry) {
  uint8_t* payload = Entry(1, 2) + 4096;
  const int index = table_->ForPayload(payload, 64 << 10);
  ASSERT_GE(index, 0);
  ASSERT_EQ(Transfer(/*read=*/true, payload, 64 << 10, 256 << 10, index),
            64 << 10);
  EXPECT_EQ(std::memcmp(payload, contents_.data() + (256 << 10), 64 << 10), 0);
}

TEST_F(FixedBufferTableTest, WriteFixedSendsTheEntryToTheFile) {
  uint8_t* payload = Entry(0, 3);
  std::memset(payload, 0x5a, 8192);
  const int index = table_->ForPayload(payload, 8192);
  ASSERT_GE(index, 0);
  ASSERT_EQ(Transfer(/*read=*/false, payload, 8192, 4096, index), 8192);
  std::vector<uint8_t> back(8192);
  ASSERT_EQ(pread(fd_, back.data(), back.size(), 4096), 8192);
  EXPECT_EQ(back, std::vector<uint8_t>(8192, 0x5a));
}

TEST_F(FixedBufferTableTest, AnEntryGrowsWhenAnIoReachesFurther) {
  uint8_t* payload = Entry(0, 1);
  const int index = table_->ForPayload(payload, 4096);
  ASSERT_GE(index, 0);
  EXPECT_EQ(table_->ForPayload(payload, 4096), index);
  EXPECT_EQ(table_->payload_registrations(), 1u);
  // 4 KiB were registered: a READ_FIXED past them is refused by the
  // kernel, so a larger I/O needs the larger registration made here.
  EXPECT_LT(Transfer(/*read=*/true, payload, 48 << 10, 0, index), 0);
  EXPECT_EQ(table_->ForPayload(payload, 48 << 10), index);
  EXPECT_EQ(table_->payload_registrations(), 2u);
  ASSERT_EQ(Transfer(/*read=*/true, payload, 48 << 10, 0, index), 48 << 10);
  EXPECT_EQ(std::memcmp(payload, contents_.data(), 48 << 10), 0);
  // Registered to the next power of two (64 KiB): one within it, a smaller
  // one too, registers nothing more.
  EXPECT_EQ(table_->ForPayload(payload + (16 << 10), 48 << 10), index);
  EXPECT_EQ(table_->ForPayload(payload + 4096, 4096), index);
  EXPECT_EQ(table_->payload_registrations(), 2u);
  ASSERT_EQ(
      Transfer(/*read=*/true, payload + (16 << 10), 48 << 10, kMiB, index),
      48 << 10);
  EXPECT_EQ(
      std::memcmp(payload + (16 << 10), contents_.data() + kMiB, 48 << 10), 0);
  // Far into the entry: registered that far.
  EXPECT_EQ(table_->ForPayload(payload + kMiB - 4096, 4096), index);
  EXPECT_EQ(table_->payload_registrations(), 3u);
  ASSERT_EQ(Transfer(/*read=*/true, payload + kMiB - 4096, 4096, 4096, index),
            4096);
  EXPECT_EQ(std::memcmp(payload + kMiB - 4096, contents_.data() + 4096, 4096),
            0);
}

TEST_F(FixedBufferTableTest, LargeIosStayOrdinary) {
  // Larger than kLargestPayloadIo: no slot, nothing registered.
  EXPECT_EQ(table_->ForPayload(Entry(0, 2),
                               FixedBufferTable::kLargestPayloadIo + 4096),
            -1);
  EXPECT_EQ(table_->ForPayload(Entry(0, 2), kMiB), -1);
  EXPECT_EQ(table_->payload_registrations(), 0u);
  EXPECT_GE(
      table_->ForPayload(Entry(0, 2), FixedBufferTable::kLargestPayloadIo), 0);
}

TEST_F(FixedBufferTableTest, RefusesWhatNoEntryHoldsAlone) {
  std::vector<uint8_t> elsewhere(4096);
  EXPECT_EQ(table_->ForPayload(elsewhere.data(), elsewhere.size()), -1);
  // Across the boundary of two entries.
  EXPECT_EQ(table_->ForPayload(Entry(0, 1) - 4096, 8192), -1);
  // Past the arena's end, and an empty range.
  EXPECT_EQ(table_->ForPayload(Entry(kQueues - 1, kDepth - 1) + kMiB, 4096),
            -1);
  EXPECT_EQ(table_->ForPayload(Entry(0, 0), 0), -1);
  EXPECT_EQ(table_->payload_registrations(), 0u);
  EXPECT_FALSE(table_->payload_refused());
}

TEST_F(FixedBufferTableTest, EngineBuffersTakeTheFirstSlotsBesideEntries) {
  std::vector<uint8_t> pool_a(64 << 10), pool_b(64 << 10);
  const int payload = table_->ForPayload(Entry(0, 0), 4096);
  ASSERT_GE(payload, 0);
  EXPECT_EQ(table_->AddEngineBuffers({iovec{pool_a.data(), pool_a.size()}}), 0);
  EXPECT_EQ(table_->AddEngineBuffers({iovec{pool_b.data(), pool_b.size()}}), 1);
  ASSERT_EQ(Transfer(/*read=*/true, pool_b.data(), 4096, 8192, 1), 4096);
  EXPECT_EQ(std::memcmp(pool_b.data(), contents_.data() + 8192, 4096), 0);
  // The entry's registration is still there.
  ASSERT_EQ(Transfer(/*read=*/true, Entry(0, 0), 4096, 0, payload), 4096);
  EXPECT_EQ(std::memcmp(Entry(0, 0), contents_.data(), 4096), 0);
}

TEST_F(FixedBufferTableTest, ARefusedRegistrationTurnsPayloadBuffersOff) {
  // Pages that cannot be pinned: the kernel refuses their registration.
  uint8_t* payload = Entry(1, 1);
  ASSERT_EQ(mprotect(payload, 64 << 10, PROT_NONE), 0);
  EXPECT_EQ(table_->ForPayload(payload, 4096), -1);
  EXPECT_TRUE(table_->payload_refused());
  ASSERT_EQ(mprotect(payload, 64 << 10, PROT_READ | PROT_WRITE), 0);
  // Off for good, even for pages that could be: no refused system call per
  // I/O. The engine buffers are another matter and still work.
  EXPECT_EQ(table_->ForPayload(Entry(0, 0), 4096), -1);
  EXPECT_EQ(table_->payload_registrations(), 0u);
  std::vector<uint8_t> pool(4096);
  ASSERT_EQ(table_->AddEngineBuffers({iovec{pool.data(), pool.size()}}), 0);
  ASSERT_EQ(Transfer(/*read=*/true, pool.data(), 4096, 4096, 0), 4096);
  EXPECT_EQ(std::memcmp(pool.data(), contents_.data() + 4096, 4096), 0);
}

TEST_F(FixedBufferTableTest, ARingThatHasATableAlreadyGetsNoSlots) {
  // A ring whose buffer table someone else made: the table cannot make its
  // own, and says so with -1 (ordinary I/O) rather than failing the I/O.
  std::vector<uint8_t> theirs(4096);
  iovec buffer{theirs.data(), theirs.size()};
  ASSERT_EQ(io_uring_register_buffers(&ring_, &buffer, 1), 0);
  EXPECT_EQ(table_->ForPayload(Entry(0, 0), 4096), -1);
  EXPECT_EQ(table_->AddEngineBuffers({buffer}), -1);
  EXPECT_EQ(table_->payload_registrations(), 0u);
}

TEST(FixedBufferTableNoArenaTest, HasNoPayloadBuffers) {
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(4, &ring, 0), 0);
  {
    FixedBufferTable table(&ring, nullptr);
    std::vector<uint8_t> memory(4096);
    EXPECT_EQ(table.ForPayload(memory.data(), memory.size()), -1);
    EXPECT_EQ(table.AddEngineBuffers({iovec{memory.data(), memory.size()}}), 0);
  }
  io_uring_queue_exit(&ring);
}

// An entry to be made huge (fuse/channel/huge_promotion.h): its slot is
// emptied so that the kernel can collapse its pages (a registered page is
// pinned, and the collapse refused), and it is not registered again until
// settled; then it is, on the huge page, and READ_FIXED lands there.
TEST(FixedBufferTableHugeTest, AnEntryToBeMadeHugeIsDroppedUntilSettled) {
  if (pvdisk::testing::ThpMode() == "never") GTEST_SKIP() << "no huge pages";
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(8, &ring, 0), 0) << "io_uring_setup";
  {
    // The top 2 of 4 entries per queue huge: entries 0 and 1 of queue 0
    // share one page that may be made huge.
    auto arena = PayloadArena::Create(kQueues, kDepth, kMiB, 2);
    ASSERT_TRUE(arena.ok()) << arena.status();
    HugePromotion* promotion = (*arena)->promotion();
    ASSERT_NE(promotion, nullptr);
    FixedBufferTable table(&ring, arena->get());
    uint8_t* entry = (*arena)->QueueBase(0);
    const int slot = table.ForPayload(entry, 4096);
    ASSERT_GE(slot, 0);
    std::memset(entry, 0x11, 4096);
    EXPECT_EQ(HugeCollapser::Collapse(entry), EAGAIN) << "pinned";
    ASSERT_TRUE(promotion->Want(0, 1));
    EXPECT_EQ(table.ForPayload(entry + kMiB, 4096), -1);
    table.DropUnpinnable();
    const int error = HugeCollapser::Collapse(entry);
    if (error == EINVAL) GTEST_SKIP() << "no MADV_COLLAPSE (Linux 6.1)";
    ASSERT_EQ(error, 0) << strerror(error);
    EXPECT_EQ(entry[4095], 0x11);
    promotion->Settle(entry, HugePromotion::State::kHuge);
    // Registered again, now on the huge page: a READ_FIXED through the
    // slot writes what the caller then sees at the entry's address.
    ASSERT_EQ(table.ForPayload(entry, 4096), slot);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    std::vector<uint8_t> sevens(4096, 0x77);
    pvdisk::testing::TempDir dir;
    const std::string file = dir.File("page");
    const int fd = open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, sevens.data(), sevens.size(), 0), 4096);
    io_uring_prep_read_fixed(sqe, fd, entry, 4096, 0, slot);
    ASSERT_EQ(io_uring_submit(&ring), 1);
    io_uring_cqe* cqe = nullptr;
    ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
    EXPECT_EQ(cqe->res, 4096);
    io_uring_cqe_seen(&ring, cqe);
    close(fd);
    EXPECT_EQ(entry[0], 0x77);
    EXPECT_EQ(entry[4095], 0x77);
  }
  io_uring_queue_exit(&ring);
}

}  // namespace
}  // namespace pvdisk::fuse::channel
