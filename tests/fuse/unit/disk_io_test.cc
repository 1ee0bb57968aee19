// DiskIo on a real Disk: a temporary image filled with a known pattern,
// served by the daemon's default transport (two queues on a backend thread)
// and the uring or the sync engine. Every test checks the bytes a read
// returns and, after Shutdown, the bytes the image file holds, against a
// model of what the image should contain.
#include "fuse/disk_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/temp_dir.h"
#include "fuse/disk.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "transport/backend_loop.h"
#include "transport/transport.h"

namespace pvdisk::fuse {
namespace {

constexpr uint64_t kSector = 512;
// 1 MiB and three sectors: the image ends neither on a page nor on a 1 MiB
// stripe, and the last three sectors are on the second queue
// (--queue-map offset).
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kImageBytes = kMiB + 3 * kSector;
// Long enough for any one operation on a loaded machine; a lost `done`
// fails the test instead of hanging it.
constexpr auto kPatience = std::chrono::seconds(30);
// What Wait returns when `done` never came.
constexpr int64_t kNoAnswer = INT64_MIN;

// The image's initial byte at `offset`. 251 is prime, so no two sectors (and
// no two pages) hold the same bytes: a read from the wrong place shows.
uint8_t Pattern(uint64_t offset) { return static_cast<uint8_t>(offset % 251); }

std::vector<uint8_t> Filled(uint64_t length, uint8_t value) {
  return std::vector<uint8_t>(length, value);
}

// Compares bytes that start at `offset` in the image; a failure names the
// first byte that differs instead of printing two long vectors.
void ExpectBytesAt(uint64_t offset, const std::vector<uint8_t>& actual,
                   const std::vector<uint8_t>& expected) {
  ASSERT_EQ(actual.size(), expected.size()) << "at " << offset;
  auto [got, wanted] = std::mismatch(actual.begin(), actual.end(),
                                     expected.begin(), expected.end());
  if (got == actual.end()) return;
  ADD_FAILURE() << "byte " << offset + (got - actual.begin()) << " is "
                << int{*got} << ", expected " << int{*wanted} << " (of "
                << actual.size() << " bytes from " << offset << ")";
}

// The result of one operation, reported once from whichever thread.
class Answer {
 public:
  DiskIo::Done Callback() {
    return [promise = promise_](int64_t result) { promise->set_value(result); };
  }
  int64_t Wait() {
    if (future_.wait_for(kPatience) != std::future_status::ready) {
      ADD_FAILURE() << "no answer within " << kPatience.count() << " s";
      return kNoAnswer;
    }
    return future_.get();
  }

 private:
  std::shared_ptr<std::promise<int64_t>> promise_ =
      std::make_shared<std::promise<int64_t>>();
  std::future<int64_t> future_ = promise_->get_future();
};

struct ReadResult {
  int64_t result = kNoAnswer;
  std::vector<uint8_t> bytes;  // what ReadDone's iovecs held
};

// A read as FUSE makes one: copies out what ReadDone hands it (valid only
// during the call) and deletes itself.
class CopyingRead final : public DiskIo::ReadOp {
 public:
  void ReadDone(int64_t result, absl::Span<const iovec> data) override {
    ReadResult answer;
    answer.result = result;
    for (const iovec& piece : data) {
      const auto* bytes = static_cast<const uint8_t*>(piece.iov_base);
      answer.bytes.insert(answer.bytes.end(), bytes, bytes + piece.iov_len);
    }
    promise_.set_value(std::move(answer));
    delete this;
  }
  std::future<ReadResult> Future() { return promise_.get_future(); }

 private:
  std::promise<ReadResult> promise_;
};

class DiskIoTest : public ::testing::TestWithParam<io::EngineKind> {
 protected:
  void SetUp() override {
    image_path_ = dir_.File("disk.img");
    expected_.resize(kImageBytes);
    for (uint64_t i = 0; i < kImageBytes; ++i) expected_[i] = Pattern(i);
    int fd = open(image_path_.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(pwrite(fd, expected_.data(), kImageBytes, 0),
              static_cast<ssize_t>(kImageBytes));
    ASSERT_EQ(close(fd), 0);

    // As the daemon fills them for `--disk disk.img --engine ...` and no
    // other flag, on the classic FUSE channel: two queues, one backend
    // thread, --queue-map offset, the backend-thread placement (no FUSE
    // uring channel drives the queues), no lent memory (the data goes
    // through the queues' data pages).
    DiskSpec spec;
    spec.path = image_path_;
    spec.arg = image_path_;
    DiskOptions options;
    options.engine = GetParam();
    options.transport.backend.poll_us = transport::kDefaultPollUs;
    absl::StatusOr<std::unique_ptr<Disk>> disk =
        Disk::Open(spec, "disk.img", options);
    ASSERT_TRUE(disk.ok()) << disk.status();
    disk_ = *std::move(disk);
    ASSERT_EQ(disk_->size_bytes(), kImageBytes);
    ASSERT_EQ(disk_->transport_options().placement,
              transport::Placement::kBackendThread);
    disk_->Start();
    disk_io_ = std::make_unique<DiskIo>(disk_.get());
  }

  // The queue FUSE would choose for a request at `offset`.
  transport::Queue& QueueAt(uint64_t offset) {
    return disk_->QueueFor(offset / kSector);
  }

  ReadResult Read(uint64_t offset, uint64_t length) {
    auto* op = new CopyingRead;
    std::future<ReadResult> future = op->Future();
    // No FUSE reply buffer: the bytes arrive in the queue's data pages.
    disk_io_->Read(QueueAt(offset), offset, length, {}, op);
    if (future.wait_for(kPatience) != std::future_status::ready) {
      ADD_FAILURE() << "read at " << offset << " not answered";
      return {};
    }
    return future.get();
  }

  // Starts a write and returns at once (the caller's buffer may go then).
  // The overload with a function wraps it in a WriteOp that deletes itself,
  // as FUSE's own write does.
  std::unique_ptr<Answer> StartWrite(uint64_t offset,
                                     const std::vector<uint8_t>& data) {
    auto answer = std::make_unique<Answer>();
    disk_io_->Write(QueueAt(offset), offset, data.data(), data.size(),
                    answer->Callback());
    return answer;
  }
  int64_t Write(uint64_t offset, const std::vector<uint8_t>& data) {
    return StartWrite(offset, data)->Wait();
  }

  int64_t Zero(uint64_t offset, uint64_t length, bool deallocate) {
    Answer answer;
    disk_io_->Zero(QueueAt(offset), offset, length, deallocate,
                   answer.Callback());
    return answer.Wait();
  }

  // What the image should now hold there.
  void Expect(uint64_t offset, const std::vector<uint8_t>& data) {
    std::copy(data.begin(), data.end(), expected_.begin() + offset);
  }
  std::vector<uint8_t> Expected(uint64_t offset, uint64_t length) const {
    return std::vector<uint8_t>(expected_.begin() + offset,
                                expected_.begin() + offset + length);
  }

  // Reads [offset, offset + length) through DiskIo and compares it with the
  // model.
  void ExpectReadsAsExpected(uint64_t offset, uint64_t length) {
    ReadResult read = Read(offset, length);
    ASSERT_EQ(read.result, static_cast<int64_t>(length)) << "at " << offset;
    ExpectBytesAt(offset, read.bytes, Expected(offset, length));
  }

  // Zeroes ranges of every shape Zero splits differently, each checked with
  // a read that includes the sector on either side.
  void ZeroRangesAndCheck(bool deallocate) {
    struct Case {
      uint64_t offset;
      uint64_t length;
    };
    for (Case c : {
             Case{8 * 1024 + 100, 20000},  // partial sectors around whole ones
             Case{64 * 1024, 16 * 1024},   // whole sectors only
             Case{100 * 1024 + 3, 10},     // inside one sector
             Case{120 * 1024 + 400, 300},  // two partial sectors, none whole
             Case{kMiB - 1000, 2000},      // across the 1 MiB stripe
         }) {
      ASSERT_EQ(Zero(c.offset, c.length, deallocate), 0) << "at " << c.offset;
      Expect(c.offset, Filled(c.length, 0));
      uint64_t first = c.offset / kSector * kSector;
      uint64_t end = (c.offset + c.length + kSector - 1) / kSector * kSector;
      ExpectReadsAsExpected(first - kSector, end - first + 2 * kSector);
    }
  }

  // Shuts the disk down (waiting for everything DiskIo accepted) and
  // compares the whole image file with the model.
  void ShutdownAndExpectImage() {
    disk_->Shutdown();
    std::vector<uint8_t> image(kImageBytes + 1);  // one more: no growth
    int fd = open(image_path_.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ssize_t got = pread(fd, image.data(), image.size(), 0);
    close(fd);
    ASSERT_EQ(got, static_cast<ssize_t>(kImageBytes));
    image.resize(kImageBytes);
    ExpectBytesAt(0, image, expected_);
  }

  pvdisk::testing::TempDir dir_{"disk_io_test"};
  std::string image_path_;
  std::vector<uint8_t> expected_;  // the model of the image
  std::unique_ptr<Disk> disk_;
  std::unique_ptr<DiskIo> disk_io_;
};

TEST_P(DiskIoTest, AlignedReadReturnsThePattern) {
  ExpectReadsAsExpected(256 * 1024, 64 * 1024);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, UnalignedReadReturnsJustTheBytesAsked) {
  // Starts and ends inside a sector: DiskIo reads whole sectors and hands
  // back only the asked bytes.
  ExpectReadsAsExpected(3 * kSector + 17, 2 * kSector + 100);
  ExpectReadsAsExpected(5 * kSector + 1, 3);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, ReadAtOrPastTheEndReturnsNothing) {
  for (uint64_t offset : {kImageBytes, kImageBytes + 1, kImageBytes + kMiB}) {
    ReadResult read = Read(offset, 4096);
    EXPECT_EQ(read.result, 0) << "at " << offset;
    EXPECT_TRUE(read.bytes.empty()) << "at " << offset;
  }
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, ReadCrossingTheEndIsCutShortThere) {
  ReadResult aligned = Read(kImageBytes - 2 * kSector, 4096);
  EXPECT_EQ(aligned.result, static_cast<int64_t>(2 * kSector));
  ExpectBytesAt(kImageBytes - 2 * kSector, aligned.bytes,
                Expected(kImageBytes - 2 * kSector, 2 * kSector));
  ReadResult unaligned = Read(kImageBytes - 1000, 4096);
  EXPECT_EQ(unaligned.result, 1000);
  ExpectBytesAt(kImageBytes - 1000, unaligned.bytes,
                Expected(kImageBytes - 1000, 1000));
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, AlignedWriteReadsBackAndReachesTheImage) {
  std::vector<uint8_t> data = Filled(8192, 0xa5);
  ASSERT_EQ(Write(64 * 1024, data), 8192);
  Expect(64 * 1024, data);
  ExpectReadsAsExpected(64 * 1024 - kSector, 8192 + 2 * kSector);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, WritePastTheEndFailsWithEnospcAndChangesNothing) {
  // Crossing the end, aligned and not; starting at it; starting past it.
  EXPECT_EQ(Write(kImageBytes - kSector, Filled(2 * kSector, 1)), -ENOSPC);
  EXPECT_EQ(Write(kImageBytes - 100, Filled(200, 2)), -ENOSPC);
  EXPECT_EQ(Write(kImageBytes, Filled(1, 3)), -ENOSPC);
  EXPECT_EQ(Write(kImageBytes + kSector, Filled(kSector, 4)), -ENOSPC);
  ExpectReadsAsExpected(kImageBytes - 4096, 4096);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, WriteEndingExactlyAtTheEndIsAccepted) {
  std::vector<uint8_t> data = Filled(700, 0x5a);  // unaligned: an RMW
  ASSERT_EQ(Write(kImageBytes - 700, data), 700);
  Expect(kImageBytes - 700, data);
  ExpectReadsAsExpected(kImageBytes - 4096, 4096);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, UnalignedWritesKeepTheRestOfTheirSectors) {
  struct Case {
    uint64_t offset;
    uint64_t length;
  };
  for (Case c : {
           Case{10 * kSector + 7, 100},                // inside one sector
           Case{20 * kSector + 300, 1500},             // both ends unaligned
           Case{30 * kSector, 700},                    // only the end
           Case{40 * kSector + 12, 2 * kSector - 12},  // only the start
           Case{50 * kSector + 511, 2},  // across one sector boundary
           Case{kMiB - 300, 600},        // across the 1 MiB stripe
       }) {
    std::vector<uint8_t> data =
        Filled(c.length, static_cast<uint8_t>(0xc0 + c.offset / kSector));
    ASSERT_EQ(Write(c.offset, data), static_cast<int64_t>(c.length))
        << "at " << c.offset;
    Expect(c.offset, data);
    uint64_t first = c.offset / kSector * kSector;
    uint64_t end = (c.offset + c.length + kSector - 1) / kSector * kSector;
    ExpectReadsAsExpected(first - kSector, end - first + 2 * kSector);
  }
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, OverlappingUnalignedWritesIssuedAtOnceEndWithTheLastOne) {
  // 64 writes, each starting 29 bytes after the previous one and a few
  // hundred bytes long, around the 1 MiB stripe boundary (so on both
  // queues), all in flight together. Where they overlap, the last issued
  // must win, and no RMW may write the old bytes of a neighbour back. (With
  // no aligned write in flight in their stripes, each RMW takes the range
  // lock as it comes, behind the earlier ones.)
  constexpr int kWrites = 64;
  std::vector<std::unique_ptr<Answer>> answers;
  std::vector<uint64_t> lengths;
  for (int i = 0; i < kWrites; ++i) {
    uint64_t offset = kMiB - 1024 + 29 * i;
    uint64_t length = 300 + (97 * i) % 400;  // the last ends before the end
    std::vector<uint8_t> data = Filled(length, static_cast<uint8_t>(i + 1));
    answers.push_back(StartWrite(offset, data));  // `data` goes at once
    lengths.push_back(length);
    Expect(offset, data);
  }
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(answers[i]->Wait(), static_cast<int64_t>(lengths[i]))
        << "write " << i;
  }
  ExpectReadsAsExpected(kMiB - 4096, kImageBytes - (kMiB - 4096));
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, UnalignedWriteAfterAnAlignedOneInFlightKeepsItsBytes) {
  // The aligned write is (almost always) still in flight when the RMW of
  // sectors 103..106 comes: the RMW must wait for it, or it could read the
  // old bytes and write them back over the new ones.
  std::vector<uint8_t> aligned = Filled(8 * kSector, 0x11);
  std::vector<uint8_t> unaligned = Filled(3 * kSector, 0x22);
  std::unique_ptr<Answer> first = StartWrite(100 * kSector, aligned);
  std::unique_ptr<Answer> second = StartWrite(103 * kSector + 5, unaligned);
  EXPECT_EQ(first->Wait(), static_cast<int64_t>(aligned.size()));
  EXPECT_EQ(second->Wait(), static_cast<int64_t>(unaligned.size()));
  Expect(100 * kSector, aligned);
  Expect(103 * kSector + 5, unaligned);
  ExpectReadsAsExpected(99 * kSector, 12 * kSector);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, AlignedWriteAfterAnUnalignedOneLandsAfterIt) {
  // Nothing else is in flight, so the RMW of sectors 200..203 takes the
  // range lock at once; it has (almost always) a read and a write still to
  // do when the aligned write of 201..202 comes, which must then wait for
  // it, with its own copy of the data (the caller's buffer is scribbled
  // over as soon as Write returns). Either way, the aligned write's bytes
  // must be the ones left.
  std::vector<uint8_t> unaligned = Filled(3 * kSector, 0x33);
  std::vector<uint8_t> aligned = Filled(2 * kSector, 0x44);
  std::unique_ptr<Answer> first = StartWrite(200 * kSector + 100, unaligned);
  std::vector<uint8_t> buffer = aligned;
  std::unique_ptr<Answer> second = StartWrite(201 * kSector, buffer);
  std::fill(buffer.begin(), buffer.end(), 0xee);
  EXPECT_EQ(first->Wait(), static_cast<int64_t>(unaligned.size()));
  EXPECT_EQ(second->Wait(), static_cast<int64_t>(aligned.size()));
  Expect(200 * kSector + 100, unaligned);
  Expect(201 * kSector, aligned);
  ExpectReadsAsExpected(199 * kSector, 6 * kSector);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, ZeroMakesTheRangeReadAsZerosAndKeepsItsNeighbours) {
  ZeroRangesAndCheck(/*deallocate=*/false);
}

TEST_P(DiskIoTest, ZeroWithDeallocateDoesTheSame) {
  ZeroRangesAndCheck(/*deallocate=*/true);
}

TEST_P(DiskIoTest, ZeroIgnoresThePartPastTheEnd) {
  // Each range starts before the end and runs 64 KiB past it: up to the end
  // it reads as zeros (the second reaches further back than the first).
  for (bool deallocate : {false, true}) {
    uint64_t offset = kImageBytes - (deallocate ? 2 * kSector + 300 : 700);
    EXPECT_EQ(Zero(offset, 64 * 1024, deallocate), 0);
    Expect(offset, Filled(kImageBytes - offset, 0));
    ExpectReadsAsExpected(kImageBytes - 4096, 4096);
  }
  // Wholly past the end: nothing to do, and no error.
  EXPECT_EQ(Zero(kImageBytes, kSector, false), 0);
  EXPECT_EQ(Zero(kImageBytes + kMiB, kSector, true), 0);
  ShutdownAndExpectImage();
}

TEST_P(DiskIoTest, FlushReportsZero) {
  ASSERT_EQ(Write(0, Filled(4096, 0x77)), 4096);
  Expect(0, Filled(4096, 0x77));
  Answer flushed;
  disk_io_->Flush(QueueAt(0), flushed.Callback());
  EXPECT_EQ(flushed.Wait(), 0);
  ShutdownAndExpectImage();
}

INSTANTIATE_TEST_SUITE_P(Engines, DiskIoTest,
                         ::testing::Values(io::EngineKind::kUring,
                                           io::EngineKind::kSync),
                         [](const ::testing::TestParamInfo<io::EngineKind>& p) {
                           return std::string(io::EngineKindName(p.param));
                         });

}  // namespace
}  // namespace pvdisk::fuse
