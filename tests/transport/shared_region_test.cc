#include "transport/shared_region.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "transport/event_fd.h"
#include "transport/queue.h"

namespace pvdisk::transport {
namespace {

TEST(SharedRegionTest, RejectsSizesNotMultipleOfPage) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{4097}}) {
    absl::StatusOr<std::unique_ptr<SharedRegion>> region =
        SharedRegion::Create("pvdisk-test", size);
    ASSERT_FALSE(region.ok()) << size;
    EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(SharedRegionTest, TwoMappingsShareZeroFilledMemory) {
  absl::StatusOr<std::unique_ptr<SharedRegion>> region =
      SharedRegion::Create("pvdisk-test", 3 * 4096);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->size(), 3u * 4096);
  EXPECT_GE((*region)->fd(), 0);
  auto a = (*region)->Map();
  auto b = (*region)->Map();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_NE((*a)->base(), (*b)->base());
  EXPECT_EQ((*a)->size(), 3u * 4096);
  for (size_t i = 0; i < 3 * 4096; ++i) ASSERT_EQ((*a)->base()[i], 0) << i;

  std::memcpy((*a)->base() + 8190, "shared", 6);
  EXPECT_EQ(std::memcmp((*b)->base() + 8190, "shared", 6), 0);
  (*b)->base()[3 * 4096 - 1] = 0x5A;
  EXPECT_EQ((*a)->base()[3 * 4096 - 1], 0x5A);
}

TEST(EventFdTest, SignalsAccumulateAndWaitClears) {
  absl::StatusOr<std::unique_ptr<EventFd>> event = EventFd::Create();
  ASSERT_TRUE(event.ok()) << event.status();
  (*event)->Signal();
  (*event)->Signal();
  (*event)->Signal();
  EXPECT_EQ((*event)->Wait(), 3u);
  (*event)->Signal();
  EXPECT_EQ((*event)->Wait(), 1u);
}

TEST(ValidateQueueOptionsTest, RingSize) {
  QueueOptions options;
  for (uint32_t good : {32u, 64u, 256u, 4096u}) {
    options.ring_size = good;
    EXPECT_TRUE(ValidateQueueOptions(options).ok()) << good;
  }
  for (uint32_t bad : {0u, 1u, 16u, 48u, 100u, 8192u}) {
    options.ring_size = bad;
    absl::Status status = ValidateQueueOptions(options);
    ASSERT_FALSE(status.ok()) << bad;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    std::string message(status.message());
    EXPECT_NE(message.find("--ring-size"), std::string::npos) << message;
    EXPECT_NE(message.find("32"), std::string::npos) << message;
    EXPECT_NE(message.find("4096"), std::string::npos) << message;
  }
}

TEST(ValidateQueueOptionsTest, MaxSegments) {
  QueueOptions options;
  EXPECT_TRUE(ValidateQueueOptions(options).ok()) << options.max_segments;
  // 11 (direct requests only) up to 8 indirect pages of 512 segments.
  for (uint32_t good : {11u, 12u, 32u, 256u, 511u, 512u, 513u, 4096u}) {
    options.max_segments = good;
    EXPECT_TRUE(ValidateQueueOptions(options).ok()) << good;
  }
  for (uint32_t bad : {0u, 1u, 4u, 10u, 4097u, 8192u}) {
    options.max_segments = bad;
    absl::Status status = ValidateQueueOptions(options);
    ASSERT_FALSE(status.ok()) << bad;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    std::string message(status.message());
    EXPECT_NE(message.find("--max-segments"), std::string::npos) << message;
    EXPECT_NE(message.find("11"), std::string::npos) << message;
    EXPECT_NE(message.find("4096"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace pvdisk::transport
