// Plugging (--plug-us) with both interrupt modes: requests held back by the
// plug must leave the staging queue when it expires, whichever thread
// handles the responses, however the requests arrive.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "stats/counters.h"
#include "transport/block_io.h"
#include "transport/interrupt_handler.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Pattern;
using testing::TransportConfig;
using testing::Waiter;

// A reader that submits its next read from its completion, as fio keeps
// its iodepth: each new request arrives while older ones are staged or in
// flight. It counts down `rounds` reads over a spread of sectors, checking
// each read's data against the image's pattern.
class LoopingReader final : public BlockIo {
 public:
  LoopingReader(FrontendQueue* queue, Waiter* waiter, uint32_t index,
                uint32_t rounds, const std::string* image)
      : queue_(queue),
        waiter_(waiter),
        index_(index),
        rounds_left_(rounds),
        image_(image) {
    op = BlockOp::kRead;
    num_sectors = 8;
    sector = NextSector();
  }

  void Complete(int result, absl::Span<const DataPiece> data) override {
    if (result != 0) {
      ++errors;
    } else {
      std::string got;
      for (const DataPiece& piece : data) {
        got.append(reinterpret_cast<const char*>(piece.data), piece.length);
      }
      if (got != image_->substr(sector * 512, 4096)) ++bad_data;
    }
    if (--rounds_left_ == 0) {
      waiter_->Done();
      return;
    }
    sector = NextSector();
    queue_->Submit(this);
  }

  std::atomic<int> errors{0};
  std::atomic<int> bad_data{0};

 private:
  // Scattered 4 KiB blocks (nothing merges by accident).
  uint64_t NextSector() {
    ++step_;
    return ((index_ * 7919 + step_ * 104729) % 2048) * 16;
  }

  FrontendQueue* const queue_;
  Waiter* const waiter_;
  const uint32_t index_;
  uint32_t rounds_left_;
  uint64_t step_ = 0;
  const std::string* const image_;
};

class PlugTest : public testing::TransportFixture,
                 public ::testing::WithParamInterface<InterruptMode> {};

// 64 readers on a 32-slot ring with a 2 ms plug. The ring fills, the busy
// score holds requests back, and readers keep adding requests with fresh
// plug deadlines. With --irq inline the responses are handled on the
// backend thread, so requests staged while the completion thread sleeps
// must still get a deadline that wakes it, or they would be stranded once
// nothing is in flight: every read must finish, with its own data.
TEST_P(PlugTest, ClosedLoopReadsOnAFullRingAllFinish) {
  constexpr uint32_t kReaders = 64;
  constexpr uint32_t kRounds = 40;
  // The readers' spread: 2048 blocks of 4 KiB, at every 16th sector.
  const std::string image = Pattern(0, 2048 * 16, 7);
  WriteImage(0, image);
  TransportConfig config;
  config.ring_size = 32;
  config.irq = GetParam();
  config.policy.plug_us = 2000;
  StartTransport(config);
  if (!transport_) return;
  Waiter* waiter = NewWaiter();
  std::vector<std::unique_ptr<LoopingReader>> readers;
  FrontendQueue& queue = transport_->queue(0).frontend();
  for (uint32_t i = 0; i < kReaders; ++i) {
    readers.push_back(
        std::make_unique<LoopingReader>(&queue, waiter, i, kRounds, &image));
  }
  for (auto& reader : readers) queue.Submit(reader.get());
  if (!waiter->WaitFor(kReaders, std::chrono::seconds(30))) {
    hung_ = true;
    for (auto& reader : readers) {
      (void)reader.release();  // the transport may still touch them
    }
    FAIL() << "only " << waiter->done() << " of " << kReaders
           << " readers finished within 30 s; stats: inflight="
           << Get(Counter::inflight) << " reqs_read=" << Get(Counter::reqs_read)
           << " plugs=" << Get(Counter::plugs);
  }
  for (auto& reader : readers) {
    EXPECT_EQ(reader->errors.load(), 0);
    EXPECT_EQ(reader->bad_data.load(), 0);
  }
  EXPECT_EQ(Get(Counter::reqs_read), uint64_t{kReaders} * kRounds);
  EXPECT_GT(Get(Counter::plugs), 0u);
  transport_->Shutdown();  // returns: nothing is left staged
}

INSTANTIATE_TEST_SUITE_P(
    IrqModes, PlugTest,
    ::testing::Values(InterruptMode::kInline, InterruptMode::kThread),
    [](const ::testing::TestParamInfo<InterruptMode>& info) {
      return std::string(InterruptModeName(info.param));
    });

}  // namespace
}  // namespace pvdisk::transport
