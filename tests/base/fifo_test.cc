#include "base/fifo.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace pvdisk {
namespace {

TEST(FifoTest, KeepsOrderAcrossWrapAndGrowth) {
  Fifo<int> fifo;
  EXPECT_TRUE(fifo.empty());
  int next_in = 0;
  int next_out = 0;
  // Push more than pop each turn, so the buffer wraps and then grows while
  // its front is in the middle.
  for (int turn = 0; turn < 200; ++turn) {
    for (int i = 0; i < 3; ++i) fifo.push_back(next_in++);
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(fifo.front(), next_out++);
      fifo.pop_front();
    }
    ASSERT_EQ(fifo.size(), static_cast<size_t>(next_in - next_out));
    for (size_t i = 0; i < fifo.size(); ++i) {
      ASSERT_EQ(fifo[i], next_out + static_cast<int>(i));
    }
    ASSERT_EQ(fifo.back(), next_in - 1);
  }
  while (!fifo.empty()) {
    ASSERT_EQ(fifo.front(), next_out++);
    fifo.pop_front();
  }
  EXPECT_EQ(next_out, next_in);
}

TEST(FifoTest, PopReleasesWhatTheElementOwned) {
  Fifo<std::shared_ptr<std::string>> fifo;
  auto value = std::make_shared<std::string>("x");
  fifo.push_back(value);
  fifo.push_back(value);
  EXPECT_EQ(value.use_count(), 3);
  fifo.pop_front();
  EXPECT_EQ(value.use_count(), 2);
  // Past the first buffer of 8, with the front mid-buffer: growing moves
  // each element once, copying none.
  for (int i = 0; i < 20; ++i) fifo.push_back(value);
  EXPECT_EQ(value.use_count(), 22);
  fifo.clear();
  EXPECT_TRUE(fifo.empty());
  EXPECT_EQ(value.use_count(), 1);
}

}  // namespace
}  // namespace pvdisk
