// The write log's bytes (io/write_log.h) follow dm-log-writes' layout, read
// here field by field at the offsets of the kernel's struct log_write_super
// and struct log_write_entry (drivers/md/dm-log-writes.c), with this test's
// own decoding, not the writer's structs; and the reader and replay
// (io/write_log_reader.h, io/write_log_replay.h) refuse what is not a whole
// log, or a replay beyond the image, leaving the image unchanged.
#include "io/write_log.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "io/write_log_reader.h"
#include "io/write_log_replay.h"
#include "temp_dir.h"

namespace pvdisk::io {
namespace {

using testing::AlignedBuffer;
using testing::ReadFileRange;
using testing::TempDir;
using testing::WriteFile;

std::string WholeFile(const std::string& path) {
  std::string data;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return data;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) data.append(buffer, n);
  close(fd);
  return data;
}

// Little-endian fields, decoded byte by byte.
uint64_t Le64(const std::string& bytes, size_t at) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes.at(at + i));
  }
  return value;
}
uint32_t Le32(const std::string& bytes, size_t at) {
  return static_cast<uint32_t>(
      Le64(bytes.substr(at, 4) + std::string(4, '\0'), 0));
}

// An entry header, at the offsets of struct log_write_entry: __le64 sector,
// nr_sectors, flags, data_len.
struct Header {
  uint64_t sector, nr_sectors, flags, data_len;
};
Header HeaderAt(const std::string& log, size_t at) {
  return Header{Le64(log, at), Le64(log, at + 8), Le64(log, at + 16),
                Le64(log, at + 24)};
}

bool AllZero(const std::string& bytes, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (bytes.at(i) != 0) return false;
  }
  return true;
}

// A log at `path`, as a disk that serves has it: created, then published.
absl::StatusOr<std::shared_ptr<WriteLog>> CreatePublished(
    const std::string& path) {
  auto log = WriteLog::Create(path);
  if (log.ok()) {
    if (absl::Status published = (*log)->Publish(); !published.ok()) {
      return published;
    }
  }
  return log;
}

TEST(WriteLogTest, BytesFollowTheDmLogWritesLayout) {
  TempDir dir;
  const std::string path = dir.File("disk.log");
  auto log = CreatePublished(path);
  ASSERT_TRUE(log.ok()) << log.status();
  // A write of two sectors at byte 4096 from two buffers, a discard of 8
  // sectors at byte 8192, a flush, a mark, and the end.
  std::string a(512, 'a'), b(512, 'b');
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  ASSERT_EQ((*log)->AppendWrite(4096, iov, 2, 1024), 0);
  ASSERT_EQ((*log)->AppendDiscard(8192, 4096), 0);
  ASSERT_EQ((*log)->AppendFlush(), 0);
  ASSERT_TRUE((*log)->AppendMark("after-a").ok());
  ASSERT_TRUE((*log)->Close().ok());
  EXPECT_EQ((*log)->counts().entries, 5u);

  const std::string bytes = WholeFile(path);
  // The superblock: __le64 magic, version, nr_entries; __le32 sectorsize.
  ASSERT_EQ(bytes.size(), 512u * 8);
  EXPECT_EQ(Le64(bytes, 0), 0x6a736677736872ull);
  EXPECT_EQ(Le64(bytes, 8), 1u);
  EXPECT_EQ(Le64(bytes, 16), 5u);
  EXPECT_EQ(Le32(bytes, 24), 512u);
  EXPECT_TRUE(AllZero(bytes, 28, 512));
  // Entry 0: the write, its header sector and its two data sectors.
  Header write = HeaderAt(bytes, 512);
  EXPECT_EQ(write.sector, 8u);
  EXPECT_EQ(write.nr_sectors, 2u);
  EXPECT_EQ(write.flags, 0u);
  EXPECT_EQ(write.data_len, 0u);
  EXPECT_TRUE(AllZero(bytes, 512 + 32, 1024));
  EXPECT_EQ(bytes.substr(1024, 1024), a + b);
  // Entry 1: the discard (flag 4), no data sectors.
  Header discard = HeaderAt(bytes, 2048);
  EXPECT_EQ(discard.sector, 16u);
  EXPECT_EQ(discard.nr_sectors, 8u);
  EXPECT_EQ(discard.flags, 4u);
  EXPECT_EQ(discard.data_len, 0u);
  // Entry 2: the flush (flag 1).
  Header flush = HeaderAt(bytes, 2560);
  EXPECT_EQ(flush.sector, 0u);
  EXPECT_EQ(flush.nr_sectors, 0u);
  EXPECT_EQ(flush.flags, 1u);
  // Entry 3: the mark (flag 8), its name after the header in its sector.
  Header mark = HeaderAt(bytes, 3072);
  EXPECT_EQ(mark.flags, 8u);
  EXPECT_EQ(mark.nr_sectors, 0u);
  EXPECT_EQ(mark.data_len, 7u);
  EXPECT_EQ(bytes.substr(3072 + 32, 7), "after-a");
  EXPECT_TRUE(AllZero(bytes, 3072 + 32 + 7, 3584));
  // Entry 4: the end mark the kernel's target also writes.
  Header end = HeaderAt(bytes, 3584);
  EXPECT_EQ(end.flags, 8u);
  EXPECT_EQ(bytes.substr(3584 + 32, end.data_len), "dm-log-writes-end");
}

TEST(WriteLogTest, SuperblockCountsEntriesAtFlushesAndMarks) {
  TempDir dir;
  const std::string path = dir.File("disk.log");
  auto log = CreatePublished(path);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(Le64(WholeFile(path), 16), 0u);
  std::string data(4096, 'x');
  iovec iov{data.data(), data.size()};
  ASSERT_EQ((*log)->AppendWrite(0, &iov, 1, 4096), 0);
  // Not yet counted: the superblock is rewritten at flushes and marks.
  EXPECT_EQ(Le64(WholeFile(path), 16), 0u);
  ASSERT_EQ((*log)->AppendFlush(), 0);
  EXPECT_EQ(Le64(WholeFile(path), 16), 2u);
  ASSERT_TRUE((*log)->AppendMark("m").ok());
  EXPECT_EQ(Le64(WholeFile(path), 16), 3u);
}

// --backend process: the daemon makes and publishes the log and hands it
// off; the backend appends to the same open file (Adopt) and ends it. The
// daemon's hand appends nothing, not even at its end, and the file is the
// backend's entries and end mark.
TEST(WriteLogTest, AHandedOffLogIsAppendedToByItsAdopter) {
  TempDir dir;
  const std::string path = dir.File("disk.log");
  auto made = WriteLog::Create(path);
  ASSERT_TRUE(made.ok()) << made.status();
  (*made)->HandOff();
  std::string data(4096, 'x');
  iovec iov{data.data(), data.size()};
  EXPECT_LT((*made)->AppendWrite(0, &iov, 1, 4096), 0);
  auto adopted = WriteLog::Adopt(dup((*made)->fd()), path);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  ASSERT_TRUE((*made)->Publish().ok());
  ASSERT_EQ((*adopted)->AppendWrite(8192, &iov, 1, 4096), 0);
  ASSERT_EQ((*adopted)->AppendFlush(), 0);
  EXPECT_EQ(Le64(WholeFile(path), 16), 2u);
  // A second adopter of a log with entries is refused.
  auto again = WriteLog::Adopt(dup((*made)->fd()), path);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*made)->Close().ok());
  made->reset();  // the daemon's hand: no end mark
  EXPECT_EQ(Le64(WholeFile(path), 16), 2u);
  ASSERT_TRUE((*adopted)->Close().ok());
  const std::string log = WholeFile(path);
  EXPECT_EQ(Le64(log, 16), 3u);  // the write, the flush, the end mark
  // 512-byte sectors; the kernel's flags: LOG_FLUSH_FLAG 1, LOG_MARK_FLAG 8.
  const size_t write = 512;
  EXPECT_EQ(HeaderAt(log, write).sector, 16u);
  const size_t flush = write + 512 + 4096;
  EXPECT_EQ(HeaderAt(log, flush).flags, 1u);
  const size_t end = flush + 512;
  EXPECT_EQ(HeaderAt(log, end).flags, 8u);
  EXPECT_EQ(log.size(), end + 512);
}

TEST(WriteLogTest, MarkNamesAreChecked) {
  TempDir dir;
  auto log = CreatePublished(dir.File("disk.log"));
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_FALSE((*log)->AppendMark("").ok());
  EXPECT_FALSE((*log)->AppendMark("two words").ok());
  EXPECT_FALSE((*log)->AppendMark(std::string(480, 'x')).ok());
  EXPECT_TRUE((*log)->AppendMark(std::string(479, 'x')).ok());
}

TEST(WriteLogTest, AnUnwritableLogIsRefusedNamingIt) {
  auto log = WriteLog::Create("/nonexistent-dir/disk.log");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("/nonexistent-dir/disk.log"),
            std::string::npos)
      << log.status();
}

// Threads append side by side, from 512-aligned buffers (written as they
// are) and from unaligned ones (copied), with flushes between; every entry
// reads back whole with its own data, and the superblock counts them all.
TEST(WriteLogTest, ThreadsAppendSideBySideAndEveryEntryIsWhole) {
  TempDir dir;
  const std::string path = dir.File("disk.log");
  auto log = CreatePublished(path);
  ASSERT_TRUE(log.ok()) << log.status();
  constexpr int kThreads = 4;
  constexpr int kWrites = 150;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&log, t] {
      AlignedBuffer aligned(64 * 1024);
      std::string unaligned(64 * 1024 + 1, '\0');
      for (int i = 0; i < kWrites; ++i) {
        const uint64_t length = 512 * (1 + (i * 7 + t) % 128);
        const char fill = static_cast<char>(1 + (t * kWrites + i) % 250);
        char* data = i % 3 == 0 ? unaligned.data() + 1 : aligned.data();
        std::memset(data, fill, length);
        iovec iov{data, length};
        const uint64_t sector = static_cast<uint64_t>(t * kWrites + i);
        EXPECT_EQ((*log)->AppendWrite(sector * 512, &iov, 1, length), 0);
        if (i % 10 == 9) {
          EXPECT_EQ((*log)->AppendFlush(), 0);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE((*log)->Close().ok());
  auto index = ReadWriteLogIndex(path);
  ASSERT_TRUE(index.ok()) << index.status();
  const int flushes = kThreads * (kWrites / 10);
  ASSERT_EQ(index->entries.size(),
            static_cast<size_t>(kThreads * kWrites + flushes + 1));
  const std::string bytes = WholeFile(path);
  int writes = 0;
  for (const WriteLogRecord& entry : index->entries) {
    if (entry.flags != 0) continue;
    ++writes;
    const int t = static_cast<int>(entry.sector / kWrites);
    const int i = static_cast<int>(entry.sector % kWrites);
    const uint64_t length = 512 * (1 + (i * 7 + t) % 128);
    const char fill = static_cast<char>(1 + (t * kWrites + i) % 250);
    ASSERT_EQ(entry.data_bytes, length) << entry.sector;
    EXPECT_TRUE(bytes.substr(entry.data_offset, length) ==
                std::string(length, fill))
        << "entry of sector " << entry.sector;
  }
  EXPECT_EQ(writes, kThreads * kWrites);
}

// The names in `folder`.
std::vector<std::string> FolderNames(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WriteLogTest, AnUnpublishedLogLeavesNothingAndTheFileThereAlone) {
  TempDir dir;
  const std::string path = dir.File("disk.log");
  WriteFile(path, 1000, 'o');
  {
    auto log = WriteLog::Create(path);
    ASSERT_TRUE(log.ok()) << log.status();
    std::string data(4096, 'x');
    iovec iov{data.data(), data.size()};
    ASSERT_EQ((*log)->AppendWrite(0, &iov, 1, 4096), 0);
    ASSERT_EQ((*log)->AppendFlush(), 0);
    EXPECT_EQ(WholeFile(path), std::string(1000, 'o'));
    EXPECT_EQ(FolderNames(dir.path()).size(), 2u);  // the log, hidden
  }
  // Destroyed without serving: the file there is untouched, nothing else.
  EXPECT_EQ(WholeFile(path), std::string(1000, 'o'));
  EXPECT_EQ(FolderNames(dir.path()), std::vector<std::string>{"disk.log"});
  // Published, the log takes the file's place.
  {
    auto log = CreatePublished(path);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->Close().ok());
  }
  EXPECT_EQ(Le64(WholeFile(path), 0), 0x6a736677736872ull);
  EXPECT_EQ(FolderNames(dir.path()), std::vector<std::string>{"disk.log"});
}

TEST(WriteLogTest, AFolderIsNoLog) {
  TempDir dir;
  auto log = WriteLog::Create(dir.path());
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find(dir.path()), std::string::npos)
      << log.status();
  EXPECT_TRUE(FolderNames(dir.path()).empty());
}

// A log of a write of 'w' over sectors 2..3 and a flush, read back.
std::string MakeSmallLog(const TempDir& dir) {
  const std::string path = dir.File("small.log");
  auto log = CreatePublished(path);
  EXPECT_TRUE(log.ok()) << log.status();
  std::string data(1024, 'w');
  iovec iov{data.data(), data.size()};
  EXPECT_EQ((*log)->AppendWrite(1024, &iov, 1, 1024), 0);
  EXPECT_EQ((*log)->AppendFlush(), 0);
  EXPECT_TRUE((*log)->Close().ok());
  return path;
}

TEST(WriteLogTest, ReaderIndexesAndReplayApplies) {
  TempDir dir;
  const std::string path = MakeSmallLog(dir);
  auto index = ReadWriteLogIndex(path);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->entries.size(), 3u);
  EXPECT_EQ(index->entries[0].sector, 2u);
  EXPECT_EQ(index->entries[0].data_bytes, 1024u);
  EXPECT_EQ(index->entries[2].mark, "dm-log-writes-end");
  const std::string image = dir.File("image");
  WriteFile(image, 8192, '.');
  ASSERT_TRUE(ReplayWriteLog(path, *index, 1, image).ok());
  EXPECT_EQ(
      ReadFileRange(image, 0, 4096),
      std::string(1024, '.') + std::string(1024, 'w') + std::string(2048, '.'));
}

TEST(WriteLogTest, ReaderRefusesBadMagicAndTruncation) {
  TempDir dir;
  const std::string path = MakeSmallLog(dir);
  // Truncated inside the write's data.
  ASSERT_EQ(truncate(path.c_str(), 512 + 512 + 100), 0);
  auto truncated = ReadWriteLogIndex(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status();
  // Cut inside the data of the last entry the superblock counts.
  const std::string last = MakeSmallLog(dir);
  const uint64_t one = 1;
  {
    int fd = open(last.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, &one, sizeof(one), 16), 8);
    close(fd);
  }
  ASSERT_TRUE(ReadWriteLogIndex(last).ok());
  ASSERT_EQ(truncate(last.c_str(), 512 + 512 + 1000), 0);
  auto cut_data = ReadWriteLogIndex(last);
  ASSERT_FALSE(cut_data.ok());
  EXPECT_NE(cut_data.status().message().find("truncated"), std::string::npos)
      << cut_data.status();
  // Not a log at all.
  WriteFile(path, 4096, 'z');
  auto junk = ReadWriteLogIndex(path);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("magic"), std::string::npos)
      << junk.status();
}

TEST(WriteLogTest, ReplayBeyondTheImageLeavesItUnchanged) {
  TempDir dir;
  const std::string path = MakeSmallLog(dir);
  auto index = ReadWriteLogIndex(path);
  ASSERT_TRUE(index.ok()) << index.status();
  // The write ends at byte 2048: an image of 1536 bytes cannot take it.
  const std::string image = dir.File("image");
  WriteFile(image, 1536, '.');
  absl::Status replayed = ReplayWriteLog(path, *index, 3, image);
  ASSERT_FALSE(replayed.ok());
  EXPECT_NE(replayed.message().find("beyond"), std::string::npos) << replayed;
  EXPECT_EQ(ReadFileRange(image, 0, 1536), std::string(1536, '.'));
}

}  // namespace
}  // namespace pvdisk::io
