// A ring the backend gives up on (the frontend published an impossible
// producer index) must not hang its callers or Shutdown(): the backend answers
// what it took, then tells the frontend, which fails everything else on that
// queue, and every later request, with EIO.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "stats/counters.h"
#include "transport/blkif/format.h"
#include "transport/block_io.h"
#include "transport_harness.h"

namespace pvdisk::transport {
namespace {

using stats::Counter;
using testing::Pattern;
using testing::TestIo;
using testing::TransportConfig;

// Maps the shared region (memfd) named `name` of this process, as a
// misbehaving frontend sees it; null if there is none.
uint8_t* MapRegionNamed(const std::string& name, size_t bytes) {
  const std::string wanted = "/memfd:" + name + " (deleted)";
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return nullptr;
  uint8_t* mapped = nullptr;
  while (dirent* entry = readdir(dir)) {
    std::string link = std::string("/proc/self/fd/") + entry->d_name;
    char target[256] = {};
    ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0 || wanted != std::string(target, n)) continue;
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                        atoi(entry->d_name), 0);
    if (memory != MAP_FAILED) mapped = static_cast<uint8_t*>(memory);
    break;
  }
  closedir(dir);
  return mapped;
}

class BrokenRingTest : public testing::TransportFixture {};

TEST_F(BrokenRingTest, RequestsFailWithEioAndShutdownReturns) {
  TransportConfig config;
  config.engine = io::EngineKind::kSync;
  // The backend polls the ring for 2 s after each request, so it sees the
  // bad index without a kick (a kick would come with a publish, which
  // would overwrite the bad index).
  config.backend.poll_us = 2'000'000;
  StartTransport(config);
  if (!transport_) return;
  uint8_t* ring = MapRegionNamed("pvdisk-transport-test-q0", 4096);
  ASSERT_NE(ring, nullptr);
  const std::string data = Pattern(0, 8, 31);
  ASSERT_EQ(Run(BlockOp::kWrite, 0, 8, &data)->result, 0);

  // The frontend publishes (an unchanged index) right after completing the
  // write; let it finish before playing the bad frontend.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto* header = reinterpret_cast<blkif::SharedRingHeader*>(ring);
  __atomic_store_n(&header->req_prod, header->req_prod + 100000,
                   __ATOMIC_RELEASE);
  const auto deadline = std::chrono::steady_clock::now() + testing::kTimeout;
  while (Get(Counter::invalid_reqs) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  munmap(ring, 4096);
  ASSERT_EQ(Get(Counter::invalid_reqs), 1u) << "the backend never looked";

  // Every request now fails at once, none hangs.
  for (int i = 0; i < 4; ++i) {
    TestIo* read = Run(BlockOp::kRead, 0, 8);
    if (hung_) return;
    EXPECT_EQ(read->result, -EIO);
    TestIo* write = Run(BlockOp::kWrite, 8, 8, &data);
    if (hung_) return;
    EXPECT_EQ(write->result, -EIO);
  }
  transport_->Shutdown();  // returns: nothing waits on the broken ring
}

}  // namespace
}  // namespace pvdisk::transport
