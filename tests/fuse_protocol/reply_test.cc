// Reply (exactly one answer per request, from any thread) and the reply
// encoders.
#include "fuse/protocol/reply.h"

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "wire_builder.h"

namespace pvdisk::fuse::protocol {
namespace {

using testing::RecordingSink;

TEST(ReplyTest, SendsExactlyOnce) {
  RecordingSink sink;
  {
    Reply reply(&sink, 3, 100);
    EXPECT_TRUE(reply.pending());
    reply.Error(ENOENT);
    EXPECT_FALSE(reply.pending());
    reply.Ok();  // ignored: answered already
  }
  auto replies = sink.replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].slot, 3u);
  EXPECT_EQ(replies[0].unique, 100u);
  EXPECT_EQ(replies[0].error, ENOENT);
}

TEST(ReplyTest, AnUnansweredReplyAnswersEio) {
  RecordingSink sink;
  { Reply forgotten(&sink, 0, 101); }
  auto replies = sink.replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].error, EIO);
}

TEST(ReplyTest, MovedRepliesAnswerOnceFromOtherThreads) {
  RecordingSink sink;
  std::vector<std::thread> threads;
  for (uint64_t i = 0; i < 16; ++i) {
    Reply reply(&sink, 0, 200 + i);
    Reply moved = std::move(reply);
    EXPECT_FALSE(reply.pending());
    threads.emplace_back([moved = std::move(moved)]() mutable {
      uint32_t value = 7;
      moved.Struct(value);
    });
  }
  for (auto& thread : threads) thread.join();
  auto replies = sink.replies();
  ASSERT_EQ(replies.size(), 16u);
  for (const auto& reply : replies) {
    EXPECT_EQ(reply.error, 0);
    EXPECT_EQ(reply.payload.size(), 4u);
  }
}

TEST(ReplyTest, AnErrorCarriesNoPayload) {
  RecordingSink sink;
  Reply reply(&sink, 0, 1);
  reply.Error(-EINVAL);  // a negative errno is taken as its absolute value
  ASSERT_EQ(sink.replies().size(), 1u);
  EXPECT_EQ(sink.replies()[0].error, EINVAL);
  EXPECT_TRUE(sink.replies()[0].payload.empty());
}

TEST(ReplyEncodingTest, DirentsArePaddedToEightBytesAndStopWhenFull) {
  std::vector<uint8_t> buffer(64);
  size_t used = 0;
  ASSERT_TRUE(AddDirent(buffer, &used, "abc", 5, S_IFREG | 0644, 1));
  EXPECT_EQ(used, 32u);  // 24 + 3, rounded up to 8
  abi::fuse_dirent dirent;
  std::memcpy(&dirent, buffer.data(), sizeof(dirent));
  EXPECT_EQ(dirent.ino, 5u);
  EXPECT_EQ(dirent.off, 1u);
  EXPECT_EQ(dirent.namelen, 3u);
  EXPECT_EQ(dirent.type, static_cast<uint32_t>(S_IFREG >> 12));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buffer.data()) + 24, 3), "abc");
  EXPECT_FALSE(AddDirent(buffer, &used, "a-much-longer-name", 6, S_IFREG, 2));
  EXPECT_EQ(used, 32u);
}

TEST(ReplyEncodingTest, TimeoutsKeepTheirFraction) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = 9;
  st.st_size = 1 << 20;
  st.st_mode = S_IFREG | 0600;
  abi::fuse_entry_out entry = EntryOut(9, st, 1.5);
  EXPECT_EQ(entry.nodeid, 9u);
  EXPECT_EQ(entry.entry_valid, 1u);
  EXPECT_EQ(entry.entry_valid_nsec, 500000000u);
  EXPECT_EQ(entry.attr.size, uint64_t{1} << 20);
  EXPECT_EQ(entry.attr.mode, static_cast<uint32_t>(S_IFREG | 0600));
}

}  // namespace
}  // namespace pvdisk::fuse::protocol
