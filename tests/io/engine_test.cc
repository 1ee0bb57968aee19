// Behaviour every engine kind shares, run against uring, sync and null over a
// real image file.
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

class EngineTest : public EngineFixture,
                   public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.kind = GetParam();
    options.depth = 64;
    std::string skip_reason;
    SetUpEngine(options, skip_reason);
    if (!skip_reason.empty()) GTEST_SKIP() << skip_reason;
  }

  bool does_io() const { return GetParam() != EngineKind::kNull; }

  // Fills `buffer` with bytes that depend on `seed` and the position.
  static void Fill(AlignedBuffer& buffer, int seed) {
    for (size_t i = 0; i < buffer.size(); ++i) {
      buffer.data()[i] =
          static_cast<char>((i * 31 + seed * 7 + i / 512) & 0xff);
    }
  }

  // Reads `length` bytes at `offset` through the engine.
  std::string ReadThroughEngine(uint64_t offset, size_t length) {
    AlignedBuffer buffer(length);
    std::memset(buffer.data(), 0x5a, length);  // must be overwritten
    std::vector<iovec> iov = {{buffer.data(), length}};
    EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, offset, iov)),
              static_cast<int64_t>(length));
    return buffer.str();
  }
};

TEST_P(EngineTest, NameAndMode) {
  EXPECT_EQ(engine_->name(), EngineKindName(GetParam()));
  if (does_io()) {
    EXPECT_EQ(engine_->mode(), image_->direct_note());
  } else {
    EXPECT_EQ(engine_->mode(), "no I/O");
  }
}

TEST_P(EngineTest, MultiIovecWritesReadBack) {
  // Offsets at the start, unaligned to 4K, in the middle and at the end.
  const uint64_t offsets[] = {0, 512 * 7, 65536, kImageBytes - 12288};
  int seed = 0;
  for (uint64_t offset : offsets) {
    ++seed;
    AlignedBuffer a(4096), b(512), c(7168);
    Fill(a, seed);
    Fill(b, seed + 100);
    Fill(c, seed + 200);
    std::vector<iovec> write_iov = {
        {a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
    const std::string expected = a.str() + b.str() + c.str();
    ASSERT_EQ(Do(*engine_, Rw(IoOp::kWrite, offset, write_iov, seed)),
              static_cast<int64_t>(expected.size()));

    // Read back through two iovecs split differently from the write.
    AlignedBuffer x(1024), y(expected.size() - 1024);
    std::memset(x.data(), 0x5a, x.size());
    std::memset(y.data(), 0x5a, y.size());
    std::vector<iovec> read_iov = {{x.data(), x.size()}, {y.data(), y.size()}};
    ASSERT_EQ(Do(*engine_, Rw(IoOp::kRead, offset, read_iov, seed)),
              static_cast<int64_t>(expected.size()));
    const std::string got = x.str() + y.str();
    if (does_io()) {
      EXPECT_EQ(got, expected) << "offset " << offset;
      EXPECT_EQ(ReadFileRange(image_path_, offset, expected.size()), expected)
          << "offset " << offset;
    } else {
      EXPECT_EQ(got, std::string(expected.size(), '\0'));
      EXPECT_EQ(ReadFileRange(image_path_, offset, expected.size()),
                std::string(expected.size(), '\0'));
    }
  }
  EXPECT_EQ(engine_->inflight(), 0u);
}

TEST_P(EngineTest, FlushSucceeds) {
  EXPECT_EQ(Do(*engine_, Range(IoOp::kFlush, 0, 0, 9)), 0);
}

TEST_P(EngineTest, DiscardAndWriteZeroesReadAsZeros) {
  for (IoOp op : {IoOp::kDiscard, IoOp::kWriteZeroes}) {
    AlignedBuffer data(65536);
    Fill(data, op == IoOp::kDiscard ? 1 : 2);
    std::vector<iovec> iov = {{data.data(), data.size()}};
    ASSERT_EQ(Do(*engine_, Rw(IoOp::kWrite, 131072, iov)), 65536);

    // Clear the middle 32K (a whole number of 4K blocks, so that a punched
    // hole is a real hole).
    ASSERT_EQ(Do(*engine_, Range(op, 131072 + 16384, 32768, 3)), 32768);
    const std::string got = ReadThroughEngine(131072, 65536);
    if (!does_io()) {
      EXPECT_EQ(got, std::string(65536, '\0'));
      continue;
    }
    const std::string original = data.str();
    EXPECT_EQ(got.substr(0, 16384), original.substr(0, 16384));
    EXPECT_EQ(got.substr(16384, 32768), std::string(32768, '\0'));
    EXPECT_EQ(got.substr(49152), original.substr(49152));
    EXPECT_EQ(ReadFileRange(image_path_, 131072 + 16384, 32768),
              std::string(32768, '\0'));
  }
}

TEST_P(EngineTest, ManyRequestsInFlight) {
  constexpr int kCount = 64;
  std::vector<AlignedBuffer> buffers;
  std::vector<std::vector<iovec>> iovs(kCount);
  for (int i = 0; i < kCount; ++i) {
    buffers.emplace_back(4096);
    Fill(buffers.back(), i);
  }
  for (int i = 0; i < kCount; ++i) {
    iovs[i] = {{buffers[i].data(), 4096}};
    ASSERT_EQ(engine_->Queue(
                  Rw(IoOp::kWrite, uint64_t{4096} * i * 3, iovs[i], 1000 + i)),
              0);
  }
  EXPECT_EQ(engine_->inflight(), static_cast<uint32_t>(kCount));
  std::set<uint64_t> tags;
  for (const IoCompletion& c : Collect(*engine_, kCount)) {
    EXPECT_EQ(c.result, 4096) << "tag " << c.tag;
    tags.insert(c.tag);
  }
  EXPECT_EQ(tags.size(), static_cast<size_t>(kCount));
  EXPECT_EQ(engine_->inflight(), 0u);

  // Read them all back at once into fresh buffers.
  std::vector<AlignedBuffer> back;
  for (int i = 0; i < kCount; ++i) back.emplace_back(4096);
  for (int i = 0; i < kCount; ++i) {
    iovs[i] = {{back[i].data(), 4096}};
    ASSERT_EQ(engine_->Queue(
                  Rw(IoOp::kRead, uint64_t{4096} * i * 3, iovs[i], 2000 + i)),
              0);
  }
  EXPECT_EQ(engine_->inflight(), static_cast<uint32_t>(kCount));
  tags.clear();
  for (const IoCompletion& c : Collect(*engine_, kCount)) {
    EXPECT_EQ(c.result, 4096) << "tag " << c.tag;
    tags.insert(c.tag);
  }
  EXPECT_EQ(tags.size(), static_cast<size_t>(kCount));
  EXPECT_EQ(engine_->inflight(), 0u);
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(back[i].str(),
              does_io() ? buffers[i].str() : std::string(4096, '\0'))
        << "request " << i;
  }
}

TEST_P(EngineTest, PollingWithoutWaitDeliversEverything) {
  // A backend that busy-polls never passes wait=true: completions must still
  // arrive (with deferred task work, the engine has to ask the kernel).
  constexpr int kCount = 16;
  AlignedBuffer buffer(4096 * kCount);
  std::vector<std::vector<iovec>> iovs(kCount);
  for (int i = 0; i < kCount; ++i) {
    iovs[i] = {{buffer.data() + 4096 * i, 4096}};
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096 * i, iovs[i], i)), 0);
  }
  std::vector<IoCompletion> out;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.size() < kCount && std::chrono::steady_clock::now() < deadline) {
    ASSERT_GE(engine_->Run(/*wait=*/false, out), 0);
  }
  ASSERT_EQ(out.size(), static_cast<size_t>(kCount));
  for (const IoCompletion& c : out) EXPECT_EQ(c.result, 4096);
  EXPECT_EQ(engine_->inflight(), 0u);
}

TEST_P(EngineTest, ReadBeyondAShrunkenFileIsEio) {
  if (!does_io()) GTEST_SKIP() << "the null engine reads nothing";
  // The image loses its last 4K behind the engine's back: a read of the last
  // 8K gets 4K (a short transfer), then nothing, which must end as -EIO
  // rather than as a success or a spin.
  ASSERT_EQ(truncate(image_path_.c_str(), kImageBytes - 4096), 0);
  AlignedBuffer buffer(8192);
  std::vector<iovec> iov = {{buffer.data(), 4096},
                            {buffer.data() + 4096, 4096}};
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, kImageBytes - 8192, iov)), -EIO);
  EXPECT_EQ(engine_->inflight(), 0u);
}

TEST_P(EngineTest, RunWithoutWaitDoesNotBlock) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 5).ok());
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/false, out), 0);
  EXPECT_TRUE(out.empty());
  engine_.reset();  // before the eventfd closes
  close(fd);
}

TEST_P(EngineTest, WakeFdInterruptsBlockingRun) {
  int quiet = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(quiet, 0);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(quiet, 41).ok());
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 42).ok());

  // Twice: the watch must stay armed after the first wake-up.
  for (int round = 0; round < 2; ++round) {
    std::thread waker([fd] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      uint64_t one = 1;
      EXPECT_EQ(write(fd, &one, sizeof(one)), 8);
    });
    std::vector<IoCompletion> out;
    const auto start = std::chrono::steady_clock::now();
    int n = engine_->Run(/*wait=*/true, out);
    const auto waited = std::chrono::steady_clock::now() - start;
    waker.join();
    ASSERT_EQ(n, 1) << "round " << round;
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].wake);
    EXPECT_EQ(out[0].tag, 42u);
    EXPECT_EQ(out[0].result, 0);
    EXPECT_GE(waited, std::chrono::milliseconds(20)) << "Run did not block";
    // The engine consumed the counter.
    uint64_t counter;
    EXPECT_EQ(read(fd, &counter, sizeof(counter)), -1);
    EXPECT_EQ(errno, EAGAIN);
  }
  engine_.reset();  // before the eventfds close
  close(fd);
  close(quiet);
}

TEST_P(EngineTest, RefusesMalformedRequests) {
  AlignedBuffer buffer(4096);
  std::vector<iovec> iov = {{buffer.data(), 4096}};
  // Past the end of the image.
  EXPECT_EQ(engine_->Queue(Rw(IoOp::kRead, kImageBytes - 512, iov)), -EINVAL);
  EXPECT_EQ(engine_->Queue(Range(IoOp::kDiscard, kImageBytes, 512)), -EINVAL);
  // Length that disagrees with the iovecs, no iovecs, empty range.
  IoRequest bad = Rw(IoOp::kWrite, 0, iov);
  bad.length = 512;
  EXPECT_EQ(engine_->Queue(bad), -EINVAL);
  EXPECT_EQ(engine_->Queue(Range(IoOp::kRead, 0, 512)), -EINVAL);
  EXPECT_EQ(engine_->Queue(Range(IoOp::kWriteZeroes, 0, 0)), -EINVAL);
  EXPECT_EQ(engine_->inflight(), 0u);
}

// OfferBuffers() is optional for every engine: requests naming an offered
// buffer work whether or not the engine registers it, and only uring does.
TEST_P(EngineTest, OfferedBuffersAreOptional) {
  AlignedBuffer buffer(16384);
  Fill(buffer, 9);
  engine_->OfferBuffers({iovec{buffer.data(), buffer.size()}});
  std::vector<iovec> iov = {{buffer.data() + 4096, 8192}};
  IoRequest write = Rw(IoOp::kWrite, 65536, iov);
  write.buffer_index = 0;
  EXPECT_EQ(Do(*engine_, write), 8192);
  EXPECT_EQ(engine_->uses_fixed_buffers(), GetParam() == EngineKind::kUring);
  if (does_io()) {
    EXPECT_EQ(ReadThroughEngine(65536, 8192),
              std::string(buffer.data() + 4096, 8192));
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, EngineTest,
                         ::testing::Values(EngineKind::kUring,
                                           EngineKind::kSync,
                                           EngineKind::kNull),
                         [](const ::testing::TestParamInfo<EngineKind>& info) {
                           return std::string(EngineKindName(info.param));
                         });

}  // namespace
}  // namespace pvdisk::io::testing
