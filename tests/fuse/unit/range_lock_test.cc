// RangeLock: shared and exclusive holds on sector ranges, FIFO waiters.
#include "fuse/range_lock.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::fuse {
namespace {

using Mode = RangeLock::Mode;

// Records which holds have started, in order.
struct Started {
  std::vector<std::string> names;
  std::function<void()> Of(const std::string& name) {
    return [this, name] { names.push_back(name); };
  }
};

TEST(RangeLockTest, OverlappingSharedHoldsStartTogether) {
  RangeLock lock;
  Started started;
  lock.Acquire(0, 8, Mode::kShared, started.Of("a"));
  lock.Acquire(4, 8, Mode::kShared, started.Of("b"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"a", "b"}));
}

TEST(RangeLockTest, ExclusiveWaitsForOverlappingSharedAndStartsOnRelease) {
  RangeLock lock;
  Started started;
  lock.Acquire(0, 8, Mode::kShared, started.Of("shared"));
  lock.Acquire(7, 2, Mode::kExclusive, started.Of("exclusive"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"shared"}));
  lock.Release(0, 8, Mode::kShared);
  EXPECT_EQ(started.names, (std::vector<std::string>{"shared", "exclusive"}));
}

TEST(RangeLockTest, DisjointRangesNeverWait) {
  RangeLock lock;
  Started started;
  lock.Acquire(0, 8, Mode::kExclusive, started.Of("a"));
  lock.Acquire(8, 8, Mode::kExclusive, started.Of("b"));
  lock.Acquire(16, 1, Mode::kShared, started.Of("c"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(RangeLockTest, SharedQueuesBehindAWaitingExclusive) {
  RangeLock lock;
  Started started;
  lock.Acquire(0, 8, Mode::kShared, started.Of("first"));
  lock.Acquire(0, 8, Mode::kExclusive, started.Of("rmw"));
  // Would not conflict with "first", but must not overtake "rmw".
  lock.Acquire(2, 2, Mode::kShared, started.Of("later"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"first"}));
  lock.Release(0, 8, Mode::kShared);
  EXPECT_EQ(started.names, (std::vector<std::string>{"first", "rmw"}));
  lock.Release(0, 8, Mode::kExclusive);
  EXPECT_EQ(started.names, (std::vector<std::string>{"first", "rmw", "later"}));
}

TEST(RangeLockTest, OverlappingExclusivesRunOneAfterAnother) {
  RangeLock lock;
  Started started;
  lock.Acquire(0, 2, Mode::kExclusive, started.Of("a"));
  lock.Acquire(1, 2, Mode::kExclusive, started.Of("b"));
  lock.Acquire(2, 2, Mode::kExclusive, started.Of("c"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"a"}));
  lock.Release(0, 2, Mode::kExclusive);
  EXPECT_EQ(started.names, (std::vector<std::string>{"a", "b"}));
  lock.Release(1, 2, Mode::kExclusive);
  EXPECT_EQ(started.names, (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace pvdisk::fuse
