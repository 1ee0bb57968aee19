// Test harness for the end-to-end transport tests: a temporary raw image, a
// Transport over it with real engines (io::CreateEngine), BlockIos that
// record their completion, and counter sums over the queues.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

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
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/failing_engine.h"
#include "io/image_file.h"
#include "stats/counters.h"
#include "stats/queue_stats.h"
#include "transport/block_io.h"
#include "transport/nvme/protocol.h"
#include "transport/protocol.h"
#include "transport/queue.h"
#include "transport/transport.h"

namespace pvdisk::io {
// Names the engine in test output instead of its bytes.
inline void PrintTo(EngineKind kind, std::ostream* os) {
  *os << EngineKindName(kind);
}
}  // namespace pvdisk::io

namespace pvdisk::transport::testing {

// A protocol's name as part of a test name ("virtio-packed" ->
// "virtio_packed": gtest names allow only letters, digits and '_').
inline std::string ProtocolTestName(const Protocol* protocol) {
  std::string name(protocol->name());
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

inline constexpr uint64_t kImageBytes = uint64_t{64} << 20;
inline constexpr uint64_t kImageSectors = kImageBytes / 512;
inline constexpr std::chrono::seconds kTimeout{30};

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
inline std::string Pattern(uint64_t first_sector, uint64_t sectors,
                           uint32_t seed) {
  std::string data(sectors * 512, '\0');
  for (uint64_t s = 0; s < sectors; ++s) {
    for (size_t i = 0; i < 512; ++i) {
      data[s * 512 + i] = static_cast<char>(
          ((first_sector + s) * 131 + i * 7 + seed * 17 + (i >> 8)) & 0xFF);
    }
  }
  return data;
}

inline const uint8_t* Bytes(const std::string& text) {
  return reinterpret_cast<const uint8_t*>(text.data());
}

struct TransportConfig {
  io::EngineKind engine = io::EngineKind::kSync;
  const Protocol* protocol = nullptr;  // null: blkif
  uint32_t queues = 1;
  uint32_t backend_threads = 1;
  QueueMap queue_map = QueueMap::kOffset;
  uint32_t ring_size = kDefaultRingSize;
  uint32_t max_segments = 11;
  bool persistent = true;
  NotifyMode notify = NotifyMode::kEventIdx;
  DataPointerMode nvme_data = DataPointerMode::kPrp;  // --frontend nvme only
  IrqCoalesce irq_coalesce;                           // --frontend nvme only
  InterruptMode irq = InterruptMode::kInline;
  bool read_only = false;
  BackendOptions backend;
  QueuePolicy policy;
  std::optional<io::FaultRange> fault;
  // When set, an engine fails as a whole when it fires (see
  // io/failing_engine.h).
  std::shared_ptr<io::EngineFailTrigger> fail_trigger;
  // No backend threads: the test attaches its own backend.
  bool backend_elsewhere = false;
  // Memory the queues may grant directly (transport/lent_memory.h).
  LentMemory lent;
};

class TransportFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() /
                           "pvdisk_transport_test.XXXXXX")
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
      // transport, its threads and everything they use behind.
      (void)transport_.release();
      (void)image_.release();
      (void)ios_.release();
    } else {
      if (transport_) transport_->Shutdown();
      transport_.reset();
      image_.reset();
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Opens the image and builds (and, with `start`, starts) a transport over
  // it. Leaves transport_ null and skips the test if io_uring is
  // unavailable.
  void StartTransport(const TransportConfig& config, bool start = true) {
    auto image = io::ImageFile::Open(path_, /*read_only=*/false,
                                     /*want_direct=*/true);
    ASSERT_TRUE(image.ok()) << image.status();
    image_ = std::move(*image);
    TransportOptions options;
    options.queue.name = "pvdisk-transport-test";
    options.queue.disk = "disk.img";
    options.queue.protocol = config.protocol;
    options.queue.ring_size = config.ring_size;
    options.queue.max_segments = config.max_segments;
    options.queue.persistent = config.persistent;
    options.queue.notify = config.notify;
    options.queue.nvme_data = config.nvme_data;
    options.queue.irq_coalesce = config.irq_coalesce;
    options.queue.irq = config.irq;
    options.queue.policy = config.policy;
    options.queue.disk_sectors = image_->size_sectors();
    options.queue.read_only = config.read_only;
    options.queue.lent = config.lent;
    options.queues = config.queues;
    options.backend_threads = config.backend_threads;
    options.queue_map = config.queue_map;
    options.backend = config.backend;
    options.backend_elsewhere = config.backend_elsewhere;
    io::ImageFile* image_file = image_.get();
    EngineFactory factory = [image_file, config](uint32_t depth,
                                                 io::RingLender* lender)
        -> absl::StatusOr<std::unique_ptr<io::IoEngine>> {
      io::EngineOptions engine_options;
      engine_options.kind = config.engine;
      engine_options.depth = depth;
      engine_options.fault = config.fault;
      engine_options.ring_lender = lender;
      absl::StatusOr<std::unique_ptr<io::IoEngine>> engine =
          io::CreateEngine(engine_options, *image_file);
      if (engine.ok() && config.fail_trigger) {
        *engine =
            io::WrapWithEngineFailure(std::move(*engine), config.fail_trigger);
      }
      return engine;
    };
    factory_ = factory;
    auto transport = Transport::Create(options, factory);
    if (!transport.ok() && config.engine == io::EngineKind::kUring &&
        (absl::IsUnimplemented(transport.status()) ||
         absl::IsPermissionDenied(transport.status()))) {
      GTEST_SKIP() << "io_uring unavailable: " << transport.status();
    }
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = std::move(*transport);
    if (start) transport_->Start();
  }

  // Hands `io` to the queue the QueueMap picks.
  void Submit(BlockIo* io) {
    transport_->QueueFor(io->sector).frontend().Submit(io);
  }

  // Submits one BlockIo and waits for it; returns it for inspection.
  TestIo* Run(BlockOp op, uint64_t sector, uint64_t sectors,
              const std::string* data = nullptr,
              std::chrono::seconds timeout = kTimeout) {
    Waiter* waiter = NewWaiter();
    TestIo* io =
        NewIo(waiter, op, sector, sectors, data ? Bytes(*data) : nullptr);
    Submit(io);
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
    std::lock_guard<std::mutex> lock(ios_->mu);
    ios_->waiters.push_back(std::make_unique<Waiter>());
    return ios_->waiters.back().get();
  }
  TestIo* NewIo(Waiter* waiter, BlockOp op, uint64_t sector, uint64_t sectors,
                const uint8_t* data) {
    std::lock_guard<std::mutex> lock(ios_->mu);
    ios_->ios.push_back(
        std::make_unique<TestIo>(waiter, op, sector, sectors, data));
    return ios_->ios.back().get();
  }

  // Writes `data` into the image at `sector` with a separate file
  // descriptor (before the transport starts, or where it does not look).
  void WriteImage(uint64_t sector, const std::string& data) {
    int fd = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ssize_t n =
        pwrite(fd, data.data(), data.size(), static_cast<off_t>(sector * 512));
    close(fd);
    ASSERT_EQ(n, static_cast<ssize_t>(data.size()));
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

  // Counters of every queue combined (counts add, maxima take the highest).
  stats::QueueSnapshot Totals() {
    std::vector<stats::QueueSnapshot> snapshots;
    for (size_t q = 0; q < transport_->queue_count(); ++q) {
      snapshots.push_back(transport_->queue(q).stats().Snapshot());
    }
    return stats::Total(snapshots.data(), snapshots.size());
  }
  uint64_t Get(stats::Counter c) { return Totals().Get(c); }
  uint64_t GetQueue(size_t q, stats::Counter c) {
    return transport_->queue(q).stats().Snapshot().Get(c);
  }

  struct Ios {
    std::mutex mu;
    std::vector<std::unique_ptr<Waiter>> waiters;
    std::vector<std::unique_ptr<TestIo>> ios;
  };

  std::string dir_;
  std::string path_;
  EngineFactory factory_;  // the one the transport was made with
  std::unique_ptr<io::ImageFile> image_;
  std::unique_ptr<Transport> transport_;
  // TearDown() shuts the transport down before these go away.
  std::unique_ptr<Ios> ios_ = std::make_unique<Ios>();
  bool hung_ = false;
};

}  // namespace pvdisk::transport::testing
