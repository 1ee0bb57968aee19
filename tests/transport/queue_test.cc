// FrontendQueue and BackendLoop end to end, without FUSE: a transport::Queue
// over a real image file and a real I/O engine.
#include "transport/queue.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/image_file.h"
#include "stats/counters.h"
#include "transport/block_io.h"

namespace pvdisk::io {
// Names the engine in test output instead of its bytes.
void PrintTo(EngineKind kind, std::ostream* os) { *os << EngineKindName(kind); }
}  // namespace pvdisk::io

namespace pvdisk::transport {
namespace {

using stats::Counter;
using namespace std::chrono_literals;

constexpr uint64_t kImageBytes = uint64_t{64} << 20;
constexpr uint64_t kImageSectors = kImageBytes / 512;
constexpr auto kTimeout = 30s;

// Counts completions of a group of BlockIos.
class Waiter {
 public:
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    cv_.notify_all();
  }
  // True when `count` completions arrived within the timeout.
  bool WaitFor(int count, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done_ >= count; });
  }
  int done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0;
};

class TestIo final : public BlockIo {
 public:
  TestIo(Waiter* waiter, BlockOp operation, uint64_t first_sector,
         uint64_t sectors, const uint8_t* data = nullptr)
      : waiter_(waiter) {
    op = operation;
    sector = first_sector;
    num_sectors = sectors;
    write_data = data;
  }
  ~TestIo() = default;

  void Complete(int completion_result,
                absl::Span<const DataPiece> data) override {
    result = completion_result;
    read_data.clear();
    for (const DataPiece& piece : data) {
      read_data.append(reinterpret_cast<const char*>(piece.data), piece.length);
    }
    ++calls;
    waiter_->Done();
  }

  // Read only after the waiter saw the completion.
  int result = 1;
  int calls = 0;
  std::string read_data;

 private:
  Waiter* waiter_;
};

// Bytes of a recognisable pattern: each 512-byte sector carries its number
// and `seed`.
std::string Pattern(uint64_t first_sector, uint64_t sectors, uint32_t seed) {
  std::string data(sectors * 512, '\0');
  for (uint64_t s = 0; s < sectors; ++s) {
    for (size_t i = 0; i < 512; ++i) {
      data[s * 512 + i] = static_cast<char>(
          ((first_sector + s) * 131 + i * 7 + seed * 17 + (i >> 8)) & 0xFF);
    }
  }
  return data;
}

const uint8_t* Bytes(const std::string& text) {
  return reinterpret_cast<const uint8_t*>(text.data());
}

std::string EngineName(const ::testing::TestParamInfo<io::EngineKind>& info) {
  return std::string(io::EngineKindName(info.param));
}

class QueueTest : public ::testing::TestWithParam<io::EngineKind> {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "pvdisk_queue_test.XXXXXX")
            .string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
    path_ = dir_ + "/disk.img";
    absl::Status created = io::CreateImage(path_, kImageBytes, false);
    ASSERT_TRUE(created.ok()) << created;
  }

  void TearDown() override {
    if (hung_) {
      // A BlockIo never completed: Shutdown() would wait forever. Leave the
      // queue, its threads and everything they use behind.
      (void)queue_.release();
      (void)image_.release();
      (void)ios_.release();
    } else {
      if (queue_) queue_->Shutdown();
      queue_.reset();
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Opens the image and starts a queue over it.
  void StartQueue(uint32_t ring_size = kDefaultRingSize,
                  uint32_t max_segments = 11,
                  std::optional<io::FaultRange> fault = std::nullopt) {
    auto image = io::ImageFile::Open(path_, /*read_only=*/false,
                                     /*want_direct=*/true);
    ASSERT_TRUE(image.ok()) << image.status();
    image_ = std::move(*image);
    io::EngineOptions engine_options;
    engine_options.kind = GetParam();
    engine_options.depth = ring_size;
    engine_options.fault = fault;
    auto engine = io::CreateEngine(engine_options, *image_);
    if (!engine.ok() && GetParam() == io::EngineKind::kUring) {
      GTEST_SKIP() << "io_uring unavailable: " << engine.status();
    }
    ASSERT_TRUE(engine.ok()) << engine.status();
    QueueOptions options;
    options.name = "pvdisk-queue-test";
    options.ring_size = ring_size;
    options.max_segments = max_segments;
    options.disk_sectors = image_->size_sectors();
    auto queue = Queue::Create(options, std::move(*engine));
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue_ = std::move(*queue);
    queue_->Start();
  }

  // Submits one BlockIo and waits for it; returns it for inspection.
  TestIo* Run(BlockOp op, uint64_t sector, uint64_t sectors,
              const std::string* data = nullptr,
              std::chrono::seconds timeout = kTimeout) {
    Waiter* waiter = NewWaiter();
    TestIo* io =
        NewIo(waiter, op, sector, sectors, data ? Bytes(*data) : nullptr);
    queue_->frontend().Submit(io);
    Wait(waiter, 1, timeout);
    return io;
  }

  void Wait(Waiter* waiter, int count,
            std::chrono::seconds timeout = kTimeout) {
    if (!waiter->WaitFor(count, timeout)) {
      hung_ = true;
      FAIL() << "only " << waiter->done() << " of " << count
             << " BlockIos completed within the timeout";
    }
  }

  Waiter* NewWaiter() {
    ios_->waiters.push_back(std::make_unique<Waiter>());
    return ios_->waiters.back().get();
  }
  TestIo* NewIo(Waiter* waiter, BlockOp op, uint64_t sector, uint64_t sectors,
                const uint8_t* data) {
    ios_->ios.push_back(
        std::make_unique<TestIo>(waiter, op, sector, sectors, data));
    return ios_->ios.back().get();
  }

  // The image's bytes, read with a separate file descriptor.
  std::string ReadImage(uint64_t sector, uint64_t sectors) {
    std::string data(sectors * 512, '\0');
    int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    if (fd < 0) return "";
    ssize_t n =
        pread(fd, data.data(), data.size(), static_cast<off_t>(sector * 512));
    close(fd);
    EXPECT_EQ(n, static_cast<ssize_t>(data.size()));
    return data;
  }

  uint64_t Get(Counter c) { return queue_->stats().Snapshot().Get(c); }

  struct Ios {
    std::vector<std::unique_ptr<Waiter>> waiters;
    std::vector<std::unique_ptr<TestIo>> ios;
  };

  std::string dir_;
  std::string path_;
  std::unique_ptr<io::ImageFile> image_;
  std::unique_ptr<Queue> queue_;
  // TearDown() shuts the queue down before these go away.
  std::unique_ptr<Ios> ios_ = std::make_unique<Ios>();
  bool hung_ = false;
};

TEST_P(QueueTest, SmallWriteThenReadBack) {
  StartQueue();
  if (!queue_) return;
  std::string data = Pattern(7, 3, 1);
  TestIo* write = Run(BlockOp::kWrite, 7, 3, &data);
  EXPECT_EQ(write->result, 0);
  EXPECT_EQ(write->calls, 1);
  EXPECT_TRUE(write->read_data.empty());

  TestIo* read = Run(BlockOp::kRead, 7, 3);
  EXPECT_EQ(read->result, 0);
  EXPECT_EQ(read->calls, 1);
  EXPECT_EQ(read->read_data, data);
  EXPECT_EQ(ReadImage(7, 3), data);
  // The sectors around it are untouched.
  EXPECT_EQ(ReadImage(6, 1), std::string(512, '\0'));
  EXPECT_EQ(ReadImage(10, 1), std::string(512, '\0'));

  EXPECT_EQ(Get(Counter::reqs_write), 1u);
  EXPECT_EQ(Get(Counter::reqs_read), 1u);
  EXPECT_EQ(Get(Counter::sectors_written), 3u);
  EXPECT_EQ(Get(Counter::sectors_read), 3u);
  EXPECT_EQ(Get(Counter::segments), 2u);
  EXPECT_EQ(Get(Counter::splits), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_EQ(Get(Counter::inflight_max), 1u);
  EXPECT_EQ(Get(Counter::kicks_sent), 2u);  // the backend slept in between
  EXPECT_EQ(Get(Counter::irqs_sent), 2u);
  EXPECT_EQ(Get(Counter::errors), 0u);
  EXPECT_EQ(Get(Counter::invalid_reqs), 0u);
}

TEST_P(QueueTest, OneMebibyteIsSplitIntoRingRequests) {
  StartQueue();
  if (!queue_) return;
  constexpr uint64_t kSector = 4096;
  constexpr uint64_t kSectors = 2048;  // 1 MiB
  std::string data = Pattern(kSector, kSectors, 2);
  TestIo* write = Run(BlockOp::kWrite, kSector, kSectors, &data);
  ASSERT_EQ(write->result, 0);
  // 11 pages = 88 sectors per ring request: ceil(2048 / 88) = 24.
  EXPECT_EQ(Get(Counter::reqs_write), 24u);
  EXPECT_EQ(Get(Counter::splits), 23u);
  EXPECT_EQ(Get(Counter::sectors_written), kSectors);
  EXPECT_EQ(Get(Counter::segments), 256u);  // 23 * 11 + 3 pages
  EXPECT_EQ(ReadImage(kSector, kSectors), data);

  TestIo* read = Run(BlockOp::kRead, kSector, kSectors);
  ASSERT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == data) << "read data differs";
  EXPECT_EQ(Get(Counter::reqs_read), 24u);
  EXPECT_EQ(Get(Counter::splits), 46u);
  EXPECT_EQ(Get(Counter::sectors_read), kSectors);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_EQ(Get(Counter::inflight_max), 24u);
  EXPECT_EQ(Get(Counter::ring_full), 0u);

  // An unaligned piece inside it.
  TestIo* part = Run(BlockOp::kRead, kSector + 85, 7);
  ASSERT_EQ(part->result, 0);
  EXPECT_TRUE(part->read_data == data.substr(85 * 512, 7 * 512));
}

TEST_P(QueueTest, WriteLargerThanTheRingIsStagedAndCopied) {
  StartQueue(/*ring_size=*/32);
  if (!queue_) return;
  // 40 ring requests do not fit on a 32-slot ring at once.
  constexpr uint64_t kSectors = 40 * 88;
  std::string data = Pattern(0, kSectors, 3);
  std::string buffer = data;
  Waiter* waiter = NewWaiter();
  TestIo* io = NewIo(waiter, BlockOp::kWrite, 0, kSectors, Bytes(buffer));
  queue_->frontend().Submit(io);
  // The data only had to stay valid until Submit() returned.
  std::memset(buffer.data(), 0xEE, buffer.size());
  Wait(waiter, 1);
  if (hung_) return;
  EXPECT_EQ(io->result, 0);
  EXPECT_EQ(io->calls, 1);
  EXPECT_GE(Get(Counter::ring_full), 1u);
  EXPECT_EQ(Get(Counter::reqs_write), 40u);
  EXPECT_EQ(Get(Counter::splits), 39u);
  EXPECT_LE(Get(Counter::inflight_max), 32u);
  EXPECT_TRUE(ReadImage(0, kSectors) == data) << "image differs";

  TestIo* read = Run(BlockOp::kRead, 0, kSectors / 2);
  ASSERT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == data.substr(0, kSectors / 2 * 512));
}

TEST_P(QueueTest, ManyConcurrentWritesFillTheRing) {
  constexpr uint32_t kRingSize = 32;
  StartQueue(kRingSize);
  if (!queue_) return;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  constexpr int kTotal = kThreads * kPerThread;
  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> ios;
  for (int i = 0; i < kTotal; ++i) {
    ios.push_back(NewIo(waiter, BlockOp::kWrite, uint64_t{8} * i, 8, nullptr));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string buffer;
      for (int k = 0; k < kPerThread; ++k) {
        int i = t * kPerThread + k;
        // One buffer per thread, overwritten as soon as Submit() returns.
        buffer = Pattern(uint64_t{8} * i, 8, 4);
        ios[i]->write_data = Bytes(buffer);
        queue_->frontend().Submit(ios[i]);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Wait(waiter, kTotal);
  if (hung_) return;
  for (int i = 0; i < kTotal; ++i) {
    ASSERT_EQ(ios[i]->result, 0) << i;
    ASSERT_EQ(ios[i]->calls, 1) << i;
  }
  EXPECT_GT(Get(Counter::ring_full), 0u);
  EXPECT_EQ(Get(Counter::reqs_write), uint64_t{kTotal});
  EXPECT_EQ(Get(Counter::sectors_written), uint64_t{kTotal} * 8);
  EXPECT_EQ(Get(Counter::segments), uint64_t{kTotal});
  EXPECT_EQ(Get(Counter::splits), 0u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_GT(Get(Counter::inflight_max), 1u);
  EXPECT_LE(Get(Counter::inflight_max), kRingSize);
  EXPECT_GE(Get(Counter::engine_inflight_max), 1u);
  EXPECT_LE(Get(Counter::engine_inflight_max), kRingSize);
  EXPECT_GT(Get(Counter::kicks_sent), 0u);
  EXPECT_GT(Get(Counter::irqs_sent), 0u);
  EXPECT_EQ(Get(Counter::errors), 0u);

  // Read everything back through the queue, 1 MiB at a time.
  const uint64_t total_sectors = uint64_t{kTotal} * 8;
  std::string expected = Pattern(0, total_sectors, 4);
  for (uint64_t first = 0; first < total_sectors; first += 2048) {
    uint64_t count = std::min<uint64_t>(2048, total_sectors - first);
    TestIo* read = Run(BlockOp::kRead, first, count);
    ASSERT_EQ(read->result, 0);
    ASSERT_TRUE(read->read_data == expected.substr(first * 512, count * 512))
        << "data differs in sectors " << first << "+" << count;
  }
}

TEST_P(QueueTest, ConcurrentReadsReturnTheirOwnData) {
  StartQueue(/*ring_size=*/32);
  if (!queue_) return;
  constexpr uint64_t kSectors = 4096;
  std::string data = Pattern(0, kSectors, 5);
  ASSERT_EQ(Run(BlockOp::kWrite, 0, kSectors, &data)->result, 0);

  constexpr int kReads = 300;
  Waiter* waiter = NewWaiter();
  std::vector<TestIo*> reads;
  for (int i = 0; i < kReads; ++i) {
    // Sizes from 1 sector to 200 sectors (3 ring requests), all over.
    uint64_t sectors = 1 + (static_cast<uint64_t>(i) * 37) % 200;
    uint64_t sector = (static_cast<uint64_t>(i) * 101) % (kSectors - sectors);
    reads.push_back(NewIo(waiter, BlockOp::kRead, sector, sectors, nullptr));
  }
  std::thread other([&] {
    for (int i = 1; i < kReads; i += 2) queue_->frontend().Submit(reads[i]);
  });
  for (int i = 0; i < kReads; i += 2) queue_->frontend().Submit(reads[i]);
  other.join();
  Wait(waiter, kReads);
  if (hung_) return;
  for (TestIo* read : reads) {
    ASSERT_EQ(read->result, 0);
    ASSERT_TRUE(read->read_data ==
                data.substr(read->sector * 512, read->num_sectors * 512))
        << "read of " << read->sector << "+" << read->num_sectors;
  }
  EXPECT_EQ(Get(Counter::inflight), 0u);
  EXPECT_LE(Get(Counter::inflight_max), 32u);
}

TEST_P(QueueTest, FlushAndDiscardAndWriteZeroes) {
  StartQueue();
  if (!queue_) return;
  constexpr uint64_t kSector = 2048;
  std::string data = Pattern(kSector, 64, 6);
  ASSERT_EQ(Run(BlockOp::kWrite, kSector, 64, &data)->result, 0);

  TestIo* flush = Run(BlockOp::kFlush, 0, 0);
  EXPECT_EQ(flush->result, 0);
  EXPECT_EQ(Get(Counter::reqs_flush), 1u);

  TestIo* discard = Run(BlockOp::kDiscard, kSector + 8, 16);
  EXPECT_EQ(discard->result, 0);
  TestIo* zeroes = Run(BlockOp::kWriteZeroes, kSector + 40, 8);
  EXPECT_EQ(zeroes->result, 0);
  EXPECT_EQ(Get(Counter::reqs_discard), 2u);
  EXPECT_EQ(Get(Counter::segments), 8u);  // only the write carried data

  std::string expected = data;
  std::memset(expected.data() + 8 * 512, 0, 16 * 512);
  std::memset(expected.data() + 40 * 512, 0, 8 * 512);
  TestIo* read = Run(BlockOp::kRead, kSector, 64);
  ASSERT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == expected) << "discarded range not zero";
  EXPECT_TRUE(ReadImage(kSector, 64) == expected);
}

TEST_P(QueueTest, InjectedErrorReachesTheBlockIoAndTheQueueGoesOn) {
  constexpr uint64_t kBad = 1024;
  StartQueue(kDefaultRingSize, 11, io::FaultRange{kBad, 8});
  if (!queue_) return;
  std::string data = Pattern(kBad, 8, 7);
  TestIo* write = Run(BlockOp::kWrite, kBad, 8, &data);
  EXPECT_EQ(write->result, -EIO);
  EXPECT_EQ(write->calls, 1);
  EXPECT_EQ(Get(Counter::errors), 1u);
  EXPECT_EQ(ReadImage(kBad, 8), std::string(8 * 512, '\0'));

  TestIo* read = Run(BlockOp::kRead, kBad - 4, 8);  // overlaps the range
  EXPECT_EQ(read->result, -EIO);
  EXPECT_TRUE(read->read_data.empty());
  EXPECT_EQ(Get(Counter::errors), 2u);

  // A split write with one failing part fails as a whole, once.
  std::string big = Pattern(0, 2048, 7);
  TestIo* split = Run(BlockOp::kWrite, 0, 2048, &big);
  EXPECT_EQ(split->result, -EIO);
  EXPECT_EQ(split->calls, 1);
  EXPECT_EQ(Get(Counter::errors), 3u);

  // Other sectors still work.
  std::string good = Pattern(4096, 16, 8);
  EXPECT_EQ(Run(BlockOp::kWrite, 4096, 16, &good)->result, 0);
  TestIo* again = Run(BlockOp::kRead, 4096, 16);
  EXPECT_EQ(again->result, 0);
  EXPECT_EQ(again->read_data, good);
  EXPECT_EQ(Get(Counter::errors), 3u);
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

TEST_P(QueueTest, RequestPastTheEndIsRejectedByTheBackend) {
  StartQueue();
  if (!queue_) return;
  TestIo* read = Run(BlockOp::kRead, kImageSectors - 4, 8);
  EXPECT_EQ(read->result, -EIO);
  EXPECT_EQ(Get(Counter::invalid_reqs), 1u);
  EXPECT_EQ(Get(Counter::reqs_read), 0u);  // never reached the engine
  TestIo* discard = Run(BlockOp::kDiscard, kImageSectors, 8);
  EXPECT_EQ(discard->result, -EIO);
  EXPECT_EQ(Get(Counter::invalid_reqs), 2u);
  // The last sectors themselves are fine.
  TestIo* last = Run(BlockOp::kRead, kImageSectors - 8, 8);
  EXPECT_EQ(last->result, 0);
  EXPECT_EQ(Get(Counter::inflight), 0u);
}

TEST_P(QueueTest, ShutdownWaitsForSubmittedIo) {
  StartQueue(/*ring_size=*/32);
  if (!queue_) return;
  constexpr int kCount = 200;
  Waiter* waiter = NewWaiter();
  std::string data = Pattern(0, 16, 9);
  std::vector<TestIo*> ios;
  for (int i = 0; i < kCount; ++i) {
    ios.push_back(
        NewIo(waiter, BlockOp::kWrite, uint64_t{16} * i, 16, Bytes(data)));
    queue_->frontend().Submit(ios.back());
  }
  queue_->Shutdown();
  EXPECT_EQ(waiter->done(), kCount);
  for (TestIo* io : ios) EXPECT_EQ(io->result, 0);
  queue_->Shutdown();  // idempotent
  queue_.reset();
}

TEST_P(QueueTest, ShutdownOfIdleQueueReturns) {
  StartQueue();
  if (!queue_) return;
  queue_->Shutdown();
  queue_.reset();
  SUCCEED();
}

// With max_segments 1 a ring request carries one page, so the data pool of a
// 32-slot ring is 32 pages (128 KiB). A read holds its chunks until all of
// its ring requests are answered, so a read needing more chunks than the pool
// has can never get them: a 1 MiB read (FUSE's maximum) needs 256.
TEST_P(QueueTest, ReadLargerThanTheDataPoolCompletes) {
  StartQueue(/*ring_size=*/32, /*max_segments=*/1);
  if (!queue_) return;
  std::string data = Pattern(0, 2048, 10);
  ASSERT_EQ(Run(BlockOp::kWrite, 0, 2048, &data)->result, 0);
  TestIo* read = Run(BlockOp::kRead, 0, 2048, nullptr, 10s);
  if (hung_) return;
  EXPECT_EQ(read->result, 0);
  EXPECT_TRUE(read->read_data == data);
}

INSTANTIATE_TEST_SUITE_P(Engines, QueueTest,
                         ::testing::Values(io::EngineKind::kSync,
                                           io::EngineKind::kUring),
                         EngineName);

}  // namespace
}  // namespace pvdisk::transport
