// The qcow2 HostFile over a volatile write cache (image/volatile_host_file.h)
// on a real file and a real io::VolatileCache: a write is held (the file
// lacks it, a read shows it) until a sync writes it out; a power cut keeping
// nothing loses what is held and fails every later call with EIO; the plain
// HostFile (qcow2/host_file.h) reads and writes the file as it is.
#include "image/volatile_host_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "image/qcow2/host_file.h"
#include "io/volatile_cache.h"

namespace pvdisk::image {
namespace {

using fuse_testing::Fd;
using fuse_testing::Open;
using fuse_testing::PreadAll;
using fuse_testing::TempDir;

std::vector<uint8_t> Bytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string Read(const qcow2::HostFile& host, uint64_t offset, size_t n) {
  std::vector<uint8_t> out(n, 0xee);
  EXPECT_TRUE(host.Read(offset, out).ok());
  return std::string(out.begin(), out.end());
}

TEST(VolatileHostFileTest, HoldsWritesUntilASyncAndLosesThemAtACut) {
  TempDir dir;
  Fd fd = Open(dir.Path("file"), O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(ftruncate(fd.get(), 8192), 0);
  auto cache = std::make_shared<io::VolatileCache>(fd.get(), "file", 1 << 20,
                                                   /*lying_flush=*/false);
  std::unique_ptr<qcow2::HostFile> host =
      MakeVolatileHostFile(cache, fd.get(), "file");

  // Unaligned metadata-sized writes: held, seen by reads, not in the file.
  ASSERT_TRUE(host->Write(100, Bytes("synced")).ok());
  EXPECT_EQ(Read(*host, 98, 10), std::string("\0\0synced\0\0", 10));
  EXPECT_EQ(PreadAll(fd.get(), 100, 6), std::string(6, '\0'));
  ASSERT_TRUE(host->Sync().ok());
  EXPECT_EQ(PreadAll(fd.get(), 100, 6), "synced");

  // Past the end of the file: zeros under the held bytes.
  ASSERT_TRUE(host->Write(5000, Bytes("held")).ok());
  ASSERT_TRUE(host->Write(102, Bytes("NC")).ok());
  EXPECT_EQ(Read(*host, 100, 6), "syNCed");
  EXPECT_EQ(Read(*host, 4998, 8), std::string("\0\0held\0\0", 8));
  EXPECT_EQ(Read(*host, 9000, 4), std::string(4, '\0'));

  absl::StatusOr<io::PowerCutResult> cut =
      cache->PowerCut(io::PowerKeep::kNone, 0);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->dropped_writes, 2u);
  EXPECT_EQ(PreadAll(fd.get(), 100, 6), "synced");
  EXPECT_EQ(PreadAll(fd.get(), 5000, 4), std::string(4, '\0'));
  std::vector<uint8_t> out(4);
  for (const absl::Status& s :
       {host->Read(0, out), host->Write(0, Bytes("x")), host->Sync()}) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("lost its power"), std::string::npos) << s;
  }
}

TEST(FdHostFileTest, ReadsWritesAndSyncsTheFile) {
  TempDir dir;
  Fd fd = Open(dir.Path("file"), O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(fd.valid());
  std::unique_ptr<qcow2::HostFile> host =
      qcow2::MakeFdHostFile(fd.get(), "file");
  ASSERT_TRUE(host->Write(10, Bytes("plain")).ok());
  EXPECT_EQ(PreadAll(fd.get(), 10, 5), "plain");
  ASSERT_TRUE(host->Sync().ok());
  EXPECT_EQ(Read(*host, 8, 9), std::string("\0\0plain\0\0", 9));
}

}  // namespace
}  // namespace pvdisk::image
