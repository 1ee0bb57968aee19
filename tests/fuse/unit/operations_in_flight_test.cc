// OperationsInFlight: shutdown waits until every operation begun has ended.
#include "fuse/operations_in_flight.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace pvdisk::fuse {
namespace {

TEST(OperationsInFlightTest, WaitForZeroReturnsAtOnceWhenIdle) {
  OperationsInFlight operations;
  operations.WaitForZero();
  EXPECT_EQ(operations.count(), 0);
}

TEST(OperationsInFlightTest, WaitForZeroReturnsOnlyAfterTheLastEnd) {
  OperationsInFlight operations;
  operations.Begin();
  operations.Begin();
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    operations.WaitForZero();
    returned = true;
  });
  operations.End();
  EXPECT_EQ(operations.count(), 1);
  EXPECT_FALSE(returned.load());  // one operation is still in flight
  operations.End();
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(operations.count(), 0);
}

TEST(OperationsInFlightTest, EndsOnOtherThreadsWakeTheWaiter) {
  OperationsInFlight operations;
  constexpr int kOperations = 10000;
  for (int i = 0; i < kOperations; ++i) operations.Begin();
  std::thread enders[4];
  for (auto& ender : enders) {
    ender = std::thread([&] {
      for (int i = 0; i < kOperations / 4; ++i) operations.End();
    });
  }
  operations.WaitForZero();
  EXPECT_EQ(operations.count(), 0);
  for (auto& ender : enders) ender.join();
}

}  // namespace
}  // namespace pvdisk::fuse
