// CacheWriter (io/volatile_cache_writer.h) over a real file open with
// O_DIRECT: many disjoint pieces, more than its writes in flight and some
// larger than one write, reach the file through its io_uring; pieces
// O_DIRECT cannot take (unaligned offsets, lengths or addresses) reach it
// through the buffered way without disturbing the direct pieces that share
// their pages; and the same writes work on a file open without O_DIRECT.
#include "io/volatile_cache_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "temp_dir.h"

namespace pvdisk::io {
namespace {

using testing::AlignedBuffer;
using testing::ReadFileRange;
using testing::TempDir;
using testing::WriteFile;

constexpr uint64_t kFileSize = 8 << 20;

class CacheWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("image");
    WriteFile(path_, kFileSize, '.');
  }
  int OpenImage(bool direct) {
    const int fd =
        open(path_.c_str(), O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0));
    EXPECT_GE(fd, 0) << path_;
    return fd;
  }
  // What the file should hold: '.' with each piece's bytes over it.
  std::string Expected(const std::vector<CacheWriter::Piece>& pieces) {
    std::string expected(kFileSize, '.');
    for (const CacheWriter::Piece& piece : pieces) {
      expected.replace(piece.offset, piece.length,
                       reinterpret_cast<const char*>(piece.data), piece.length);
    }
    return expected;
  }

  TempDir dir_;
  std::string path_;
};

// Fills `buffer` with bytes that differ from piece to piece and from '.'.
void Fill(AlignedBuffer& buffer, uint32_t seed) {
  std::mt19937 random(seed);
  for (size_t i = 0; i < buffer.size(); ++i) {
    buffer.data()[i] = static_cast<char>('a' + random() % 26);
  }
}

TEST_F(CacheWriterTest, ManyAlignedPiecesGoDirectThroughTheRing) {
  const int fd = OpenImage(true);
  ASSERT_GE(fd, 0);
  CacheWriter writer(fd);
  EXPECT_TRUE(writer.uses_ring());
  EXPECT_TRUE(writer.direct());
  // 100 pieces of 4 KiB, every other 8 KiB (more than the writes in
  // flight), 4 touching pieces (merged into one write), and one of 3 MiB
  // (split in writes of at most 1 MiB), from 512-aligned places.
  std::vector<AlignedBuffer> buffers;
  buffers.reserve(106);
  std::vector<CacheWriter::Piece> pieces;
  for (uint64_t i = 0; i < 100; ++i) {
    buffers.emplace_back(4096);
    Fill(buffers.back(), static_cast<uint32_t>(i));
    pieces.push_back(CacheWriter::Piece{
        i * 8192, reinterpret_cast<const uint8_t*>(buffers.back().data()),
        4096});
  }
  for (uint64_t i = 0; i < 4; ++i) {
    buffers.emplace_back(1024);
    Fill(buffers.back(), static_cast<uint32_t>(1000 + i));
    pieces.push_back(CacheWriter::Piece{
        (1 << 20) + 512 + i * 1024,
        reinterpret_cast<const uint8_t*>(buffers.back().data()), 1024});
  }
  buffers.emplace_back(3 << 20);
  Fill(buffers.back(), 2000);
  pieces.push_back(CacheWriter::Piece{
      (2 << 20) + 1536, reinterpret_cast<const uint8_t*>(buffers.back().data()),
      3 << 20});
  ASSERT_EQ(writer.Write(pieces), 0);
  ASSERT_EQ(writer.Sync(), 0);
  EXPECT_EQ(writer.buffered_pieces(), 0u);
  EXPECT_TRUE(ReadFileRange(path_, 0, kFileSize) == Expected(pieces));
  close(fd);
}

TEST_F(CacheWriterTest, UnalignedPiecesGoBufferedBesideDirectOnes) {
  const int fd = OpenImage(true);
  ASSERT_GE(fd, 0);
  CacheWriter writer(fd);
  AlignedBuffer direct(8192);
  Fill(direct, 1);
  AlignedBuffer other(8192);
  Fill(other, 2);
  const auto* a = reinterpret_cast<const uint8_t*>(direct.data());
  const auto* b = reinterpret_cast<const uint8_t*>(other.data());
  const std::vector<CacheWriter::Piece> pieces = {
      {0, a, 1024},            // direct
      {1024 + 100, b, 300},    // odd offset and length, same page
      {2048, a + 2048, 2048},  // direct, the rest of that page
      {4096, b + 1, 512},      // an odd address
      {4608, a + 4608, 3584},  // direct, up to 8 KiB
      {kFileSize - 7, b, 7},   // the file's last bytes
  };
  ASSERT_EQ(writer.Write(pieces), 0);
  ASSERT_EQ(writer.Sync(), 0);
  EXPECT_EQ(writer.buffered_pieces(), 3u);
  EXPECT_TRUE(ReadFileRange(path_, 0, kFileSize) == Expected(pieces));
  // Again over the same bytes, the other way round: direct writes after
  // buffered ones in the page cache still land, and read back.
  const std::vector<CacheWriter::Piece> again = {
      {0, b, 8192},
      {kFileSize - 7, a, 7},
  };
  ASSERT_EQ(writer.Write(again), 0);
  std::vector<CacheWriter::Piece> all = pieces;
  all.insert(all.end(), again.begin(), again.end());
  EXPECT_TRUE(ReadFileRange(path_, 0, kFileSize) == Expected(all));
  close(fd);
}

TEST_F(CacheWriterTest, AFileWithoutODirectTakesEveryPiece) {
  const int fd = OpenImage(false);
  ASSERT_GE(fd, 0);
  CacheWriter writer(fd);
  EXPECT_FALSE(writer.direct());
  AlignedBuffer data(4096);
  Fill(data, 3);
  const auto* d = reinterpret_cast<const uint8_t*>(data.data());
  const std::vector<CacheWriter::Piece> pieces = {
      {3, d + 5, 100}, {4096, d, 4096}, {10000, d + 1, 17}};
  ASSERT_EQ(writer.Write(pieces), 0);
  ASSERT_EQ(writer.Sync(), 0);
  EXPECT_EQ(writer.buffered_pieces(), 0u);  // all of them the file's way
  EXPECT_TRUE(ReadFileRange(path_, 0, kFileSize) == Expected(pieces));
  close(fd);
}

TEST_F(CacheWriterTest, AFailedWriteIsReported) {
  // A descriptor open read-only: every write fails with EBADF.
  const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  ASSERT_GE(fd, 0);
  CacheWriter writer(fd);
  AlignedBuffer data(4096);
  const std::vector<CacheWriter::Piece> pieces = {
      {0, reinterpret_cast<const uint8_t*>(data.data()), 4096}};
  EXPECT_EQ(writer.Write(pieces), -EBADF);
  close(fd);
}

}  // namespace
}  // namespace pvdisk::io
