// A storm of invalid requests through a real transport (rings, backend
// thread, engine): every one is counted in invalid_reqs, while the log gets
// a bounded number of lines, each naming the disk and queue, and one count
// of the rest (base/event_log.h).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "base/event_log.h"
#include "base/log_sink.h"
#include "gtest/gtest.h"
#include "stats/counters.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::TransportConfig;

class InvalidRequestLogTest : public testing::TransportFixture {};

TEST_F(InvalidRequestLogTest, TenThousandMakeABoundedLogAndACount) {
  const std::string log = dir_ + "/pvdisk.log";
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  SetLogTarget(LogTarget::kFile, fd);
  TransportConfig config;
  config.engine = io::EngineKind::kSync;
  StartTransport(config);
  constexpr int kInvalid = 10'000;
  const auto started = std::chrono::steady_clock::now();
  // Past the end of the disk: the backend's validation rejects it.
  for (int i = 0; i < kInvalid; ++i) {
    ASSERT_EQ(Run(BlockOp::kRead, testing::kImageSectors - 4, 8)->result, -EIO);
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - started)
                           .count();
  EXPECT_EQ(transport_->queue(0).stats().Snapshot().Get(Counter::invalid_reqs),
            static_cast<uint64_t>(kInvalid));
  FlushEventLog();
  SetLogTarget(LogTarget::kStderr);
  close(fd);

  std::ifstream in(log);
  std::string line;
  int written = 0, count_lines = 0;
  uint64_t suppressed = 0;
  const std::string subject = "disk=disk.img queue=0 invalid_request: ";
  while (std::getline(in, line)) {
    size_t at = line.find(subject);
    ASSERT_NE(at, std::string::npos) << line;
    std::string cause = line.substr(at + subject.size());
    if (cause.find(" more suppressed") != std::string::npos) {
      ++count_lines;
      suppressed += std::stoull(cause);
    } else {
      EXPECT_NE(cause.find("failed validation; answered EINVAL"),
                std::string::npos)
          << line;
      ++written;
    }
  }
  // kEventBurst lines and one count per window of kEventWindowSeconds.
  const int windows = static_cast<int>(seconds / kEventWindowSeconds) + 1;
  EXPECT_GE(written, 1);
  EXPECT_LE(written, static_cast<int>(kEventBurst) * windows);
  EXPECT_GE(count_lines, 1);
  EXPECT_LE(count_lines, windows);
  EXPECT_EQ(written + suppressed, static_cast<uint64_t>(kInvalid));
}

}  // namespace
}  // namespace pvdisk::transport
