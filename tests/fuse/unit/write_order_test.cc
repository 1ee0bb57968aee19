// WriteOrder: plain writes take the lock-free path unless a read-modify-
// write is registered in their stripes; RMWs wait for overlapping writes
// in flight, and writes wait for overlapping RMWs.
#include "fuse/write_order.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::fuse {
namespace {

using Hold = WriteOrder::Hold;
constexpr uint64_t kStripe = uint64_t{1} << WriteOrder::kStripeShift;

// Records the holds that started, by name.
struct Started {
  std::vector<std::string> names;
  std::vector<Hold> holds;
  WriteOrder::Start Of(const std::string& name) {
    return [this, name](const Hold& hold) {
      names.push_back(name);
      holds.push_back(hold);
    };
  }
  const Hold& HoldOf(const std::string& name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return holds[i];
    }
    ADD_FAILURE() << name << " has not started";
    return holds.front();
  }
};

TEST(WriteOrderTest, PlainWritesTakeTheFastPathWithNoRmwAround) {
  WriteOrder order;
  std::optional<Hold> a = order.TryAcquireWrite(0, 8);
  std::optional<Hold> b = order.TryAcquireWrite(0, 8);  // overlapping: fine
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->kind, Hold::Kind::kPlainFast);
  order.Release(*a);
  order.Release(*b);
}

TEST(WriteOrderTest, RmwWaitsForAnOverlappingWriteInFlight) {
  WriteOrder order;
  Started started;
  std::optional<Hold> write = order.TryAcquireWrite(0, 8);
  ASSERT_TRUE(write);
  order.AcquireReadModifyWrite(7, 2, started.Of("rmw"));
  EXPECT_TRUE(started.names.empty());
  order.Release(*write);
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw"}));
  order.Release(started.HoldOf("rmw"));
}

TEST(WriteOrderTest, WritesWaitForAnOverlappingRmwAndStartOnItsRelease) {
  WriteOrder order;
  Started started;
  order.AcquireReadModifyWrite(10, 1, started.Of("rmw"));
  ASSERT_EQ(started.names, (std::vector<std::string>{"rmw"}));
  // The same stripe: no fast path while the RMW is registered.
  EXPECT_FALSE(order.TryAcquireWrite(8, 4));
  order.AcquireWrite(8, 4, started.Of("write"));
  order.AcquireWrite(0, kStripe, started.Of("discard"));  // whole stripe
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw"}));
  order.Release(started.HoldOf("rmw"));
  EXPECT_EQ(started.names,
            (std::vector<std::string>{"rmw", "write", "discard"}));
  EXPECT_EQ(started.HoldOf("write").kind, Hold::Kind::kPlainLocked);
  order.Release(started.HoldOf("write"));
  order.Release(started.HoldOf("discard"));
  // Nothing registered any more: the fast path is back.
  std::optional<Hold> again = order.TryAcquireWrite(8, 4);
  ASSERT_TRUE(again);
  order.Release(*again);
}

TEST(WriteOrderTest, WritesNearAnRmwButNotOverlappingItDoNotWait) {
  WriteOrder order;
  Started started;
  order.AcquireReadModifyWrite(10, 1, started.Of("rmw"));
  order.AcquireWrite(11, 4, started.Of("neighbour"));  // same stripe
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw", "neighbour"}));
  // Another stripe, another slot: the fast path.
  std::optional<Hold> far = order.TryAcquireWrite(3 * kStripe, 8);
  ASSERT_TRUE(far);
  order.Release(*far);
  order.Release(started.HoldOf("neighbour"));
  order.Release(started.HoldOf("rmw"));
}

TEST(WriteOrderTest, RmwWaitsForAWriteThatTookTheLockedPath) {
  WriteOrder order;
  Started started;
  order.AcquireReadModifyWrite(0, 1, started.Of("rmw1"));
  order.AcquireWrite(2, 4, started.Of("write"));  // locked, starts at once
  order.AcquireReadModifyWrite(5, 1, started.Of("rmw2"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw1", "write"}));
  order.Release(started.HoldOf("rmw1"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw1", "write"}));
  order.Release(started.HoldOf("write"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw1", "write", "rmw2"}));
  order.Release(started.HoldOf("rmw2"));
}

TEST(WriteOrderTest, OverlappingRmwsRunOneAfterAnother) {
  WriteOrder order;
  Started started;
  order.AcquireReadModifyWrite(4, 2, started.Of("a"));
  order.AcquireReadModifyWrite(5, 2, started.Of("b"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"a"}));
  order.Release(started.HoldOf("a"));
  EXPECT_EQ(started.names, (std::vector<std::string>{"a", "b"}));
  order.Release(started.HoldOf("b"));
}

TEST(WriteOrderTest, AWriteSpanningEveryStripeSeesAnRmwAnywhere) {
  WriteOrder order;
  Started started;
  std::optional<Hold> discard =
      order.TryAcquireWrite(0, 1000 * kStripe);  // every slot
  ASSERT_TRUE(discard);
  order.AcquireReadModifyWrite(500 * kStripe + 3, 1, started.Of("rmw"));
  EXPECT_TRUE(started.names.empty());
  order.Release(*discard);
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw"}));
  EXPECT_FALSE(order.TryAcquireWrite(0, 1000 * kStripe));
  order.Release(started.HoldOf("rmw"));
}

TEST(WriteOrderTest, AnRmwWaitsForEveryFastWriteOfItsStripe) {
  // The price of a lock-free path: fast writes are counted per stripe slot,
  // not per range, so an RMW also waits for a disjoint write in its stripe.
  WriteOrder order;
  Started started;
  std::optional<Hold> disjoint = order.TryAcquireWrite(100, 8);
  ASSERT_TRUE(disjoint);
  order.AcquireReadModifyWrite(0, 1, started.Of("rmw"));
  EXPECT_TRUE(started.names.empty());
  order.Release(*disjoint);
  EXPECT_EQ(started.names, (std::vector<std::string>{"rmw"}));
  order.Release(started.HoldOf("rmw"));
}

// Many threads acquire and release random writes and RMWs over a few
// stripes; whenever a hold starts, no conflicting hold may be active on any
// of its sectors (checked with per-sector counters, each side marking
// before it looks, so one of two conflicting holds always sees the other).
TEST(WriteOrderTest, ConcurrentHoldsNeverConflict) {
  constexpr uint64_t kSectors = 3 * kStripe;
  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 20000;
  WriteOrder order;
  std::vector<std::atomic<int>> plain(kSectors);
  std::vector<std::atomic<int>> rmw(kSectors);
  std::atomic<int> conflicts{0};
  std::mutex ready_mu;
  std::deque<Hold> ready;  // started, not yet released
  std::atomic<int> acquired{0};
  std::atomic<int> released{0};

  auto on_start = [&](const Hold& hold) {
    bool exclusive = hold.kind == Hold::Kind::kReadModifyWrite;
    for (uint64_t s = hold.first; s < hold.first + hold.count; ++s) {
      if (exclusive) {
        if (rmw[s].fetch_add(1) != 0 || plain[s].load() != 0) ++conflicts;
      } else {
        plain[s].fetch_add(1);
        if (rmw[s].load() != 0) ++conflicts;
      }
    }
    std::lock_guard<std::mutex> lock(ready_mu);
    ready.push_back(hold);
  };
  auto release_one = [&] {
    Hold hold;
    {
      std::lock_guard<std::mutex> lock(ready_mu);
      if (ready.empty()) return false;
      hold = ready.front();
      ready.pop_front();
    }
    for (uint64_t s = hold.first; s < hold.first + hold.count; ++s) {
      (hold.kind == Hold::Kind::kReadModifyWrite ? rmw : plain)[s].fetch_sub(1);
    }
    order.Release(hold);
    ++released;
    return true;
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < kOpsPerThread; ++i) {
        // Small ranges near stripe boundaries, now and then a long one.
        uint64_t count =
            rng() % 50 == 0 ? 1 + rng() % (2 * kStripe) : 1 + rng() % 8;
        uint64_t first = rng() % (kSectors - count + 1);
        ++acquired;
        if (rng() % 3 == 0) {
          order.AcquireReadModifyWrite(first, count, on_start);
        } else {
          order.AcquireWrite(first, count, on_start);
        }
        // Keep some holds in flight (started or waiting), as many as a
        // deep queue would. A hold may be between its pop and its release
        // on another thread: then wait for that thread.
        while (acquired.load() - released.load() > 64) {
          if (!release_one()) std::this_thread::yield();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  // Releasing what started lets the waiters start, until none is left.
  while (release_one()) {
  }
  EXPECT_EQ(released.load(), kThreads * kOpsPerThread);
  EXPECT_EQ(conflicts.load(), 0);
}

}  // namespace
}  // namespace pvdisk::fuse
