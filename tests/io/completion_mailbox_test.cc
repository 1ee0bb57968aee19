// CompletionMailbox: items put by other threads reach the owner exactly
// once, the eventfd is written once per batch, and no item is left unseen
// while the owner sleeps in poll().
#include "io/completion_mailbox.h"

#include <poll.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::io {
namespace {

// Whether the mailbox's eventfd is readable within `timeout_ms`.
bool Signalled(const CompletionMailbox<int>& mailbox, int timeout_ms) {
  pollfd fd = {mailbox.fd(), POLLIN, 0};
  return poll(&fd, 1, timeout_ms) == 1;
}

TEST(CompletionMailboxTest, OneWritePerBatchAndAgainAfterTheTake) {
  CompletionMailbox<int> mailbox;
  ASSERT_TRUE(mailbox.Init().ok());
  std::vector<int> taken;
  EXPECT_FALSE(mailbox.TakeAll(taken));
  EXPECT_FALSE(Signalled(mailbox, 0));

  EXPECT_TRUE(mailbox.Put(1));   // the first of a batch writes
  EXPECT_FALSE(mailbox.Put(2));  // the rest ride along
  EXPECT_FALSE(mailbox.Put(3));
  EXPECT_TRUE(Signalled(mailbox, 0));
  EXPECT_TRUE(mailbox.ClearSignal());
  EXPECT_FALSE(Signalled(mailbox, 0));
  ASSERT_TRUE(mailbox.TakeAll(taken));
  EXPECT_EQ(taken, (std::vector<int>{1, 2, 3}));

  // After the take the next put signals again.
  EXPECT_TRUE(mailbox.Put(4));
  EXPECT_TRUE(Signalled(mailbox, 0));
  // A put between ClearSignal and TakeAll is taken without a write.
  EXPECT_TRUE(mailbox.ClearSignal());
  EXPECT_FALSE(mailbox.Put(5));
  taken.clear();
  ASSERT_TRUE(mailbox.TakeAll(taken));
  EXPECT_EQ(taken, (std::vector<int>{4, 5}));
  EXPECT_FALSE(Signalled(mailbox, 0));
  EXPECT_FALSE(mailbox.TakeAll(taken));
}

// Several threads put; the owner sleeps in poll() (at most 5 s: a lost
// wake-up fails the test instead of hanging it), clears, takes. Every item
// arrives exactly once.
TEST(CompletionMailboxTest, NoItemIsLostOrDuplicatedAcrossThreads) {
  constexpr int kThreads = 3;
  constexpr int kPerThread = 20000;
  CompletionMailbox<int> mailbox;
  ASSERT_TRUE(mailbox.Init().ok());
  std::vector<std::thread> putters;
  for (int t = 0; t < kThreads; ++t) {
    putters.emplace_back([&mailbox, t] {
      for (int i = 0; i < kPerThread; ++i) {
        mailbox.Put(t * kPerThread + i);
        if (i % 64 == 0) std::this_thread::yield();
      }
    });
  }
  std::vector<int> taken;
  int writes_seen = 0;
  while (taken.size() < size_t{kThreads} * kPerThread) {
    ASSERT_TRUE(Signalled(mailbox, 5000))
        << "no signal with " << taken.size() << " items taken";
    writes_seen += mailbox.ClearSignal() ? 1 : 0;
    mailbox.TakeAll(taken);
  }
  for (std::thread& putter : putters) putter.join();
  EXPECT_FALSE(mailbox.TakeAll(taken));
  ASSERT_EQ(taken.size(), size_t{kThreads} * kPerThread);
  std::sort(taken.begin(), taken.end());
  for (int i = 0; i < kThreads * kPerThread; ++i) ASSERT_EQ(taken[i], i);
  EXPECT_GT(writes_seen, 0);
}

}  // namespace
}  // namespace pvdisk::io
