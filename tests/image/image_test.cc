// The image layer on real files: a raw image's virtual size and identity,
// the engines it makes, its lock, its flush reaching the file system the
// file lives on (counted by the tests' flush-counting FUSE file system), and
// the same image rebuilt from its files' descriptors.
#include "image/image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flush_counting_mount.h"
#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "image/open_image.h"
#include "io/image_file.h"
#include "io/image_lock.h"

namespace pvdisk::image {
namespace {

using fuse_testing::FlushCountingMount;
using fuse_testing::TempDir;

constexpr uint64_t kImageBytes = (8 << 20) + 512;
constexpr size_t kBlock = 4096;

ImageSpec RawSpec(const std::string& path, io::EngineKind engine) {
  ImageSpec spec;
  spec.path = path;
  spec.engine = engine;
  return spec;
}

struct Stat {
  dev_t dev = 0;
  ino_t ino = 0;
};
Stat StatOf(int fd) {
  struct stat st = {};
  EXPECT_EQ(fstat(fd, &st), 0) << std::strerror(errno);
  return {st.st_dev, st.st_ino};
}

// A 4 KiB buffer aligned for O_DIRECT.
struct Block {
  Block() : data(static_cast<char*>(std::aligned_alloc(kBlock, kBlock))) {}
  ~Block() { std::free(data); }
  char* data;
};

// One request through `engine`, waited for; its result.
int64_t Do(io::IoEngine& engine, io::IoOp op, uint64_t offset, char* data) {
  iovec iov = {data, kBlock};
  io::IoRequest request;
  request.op = op;
  request.offset = offset;
  request.length = kBlock;
  request.iov = &iov;
  request.iov_count = 1;
  request.tag = 7;
  if (int rc = engine.Queue(request); rc < 0) return rc;
  std::vector<io::IoCompletion> done;
  while (done.empty()) {
    if (int rc = engine.Run(/*wait=*/true, done); rc < 0) return rc;
  }
  EXPECT_EQ(done[0].tag, 7u);
  return done[0].result;
}

io::EngineOptions Depth(uint32_t depth) {
  io::EngineOptions options;
  options.depth = depth;
  return options;
}

// Whether another open of `path` could lock the image now (no grace).
bool OthersCanLock(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  absl::Status locked = io::LockImage(fd, path, /*read_only=*/false,
                                      std::chrono::milliseconds(0));
  close(fd);  // drops the locks of that open with it
  return locked.ok();
}

TEST(RawImageTest, ItsVirtualSizeIsTheFilesAndItIsThatOneFile) {
  TempDir dir;
  const std::string path = dir.Path("disk.img");
  ASSERT_TRUE(io::CreateImage(path, kImageBytes, false).ok());
  auto image = OpenImage(RawSpec(path, io::EngineKind::kSync));
  ASSERT_TRUE(image.ok()) << image.status();
  const Image& raw = **image;
  EXPECT_EQ(raw.size_bytes(), kImageBytes);
  EXPECT_EQ(raw.size_sectors(), kImageBytes / 512);
  EXPECT_EQ(raw.name(), path);
  EXPECT_FALSE(raw.read_only());
  EXPECT_EQ(raw.engine(), io::EngineKind::kSync);
  ASSERT_EQ(raw.files().size(), 1u);
  struct stat by_path = {};
  ASSERT_EQ(stat(path.c_str(), &by_path), 0);
  const Stat file = StatOf(raw.files()[0]);
  EXPECT_EQ(file.dev, by_path.st_dev);
  EXPECT_EQ(file.ino, by_path.st_ino);
  EXPECT_EQ(raw.attributes().st_ino, by_path.st_ino);
  EXPECT_EQ(raw.identity(), absl::StrCat(by_path.st_ino));
}

TEST(RawImageTest, HoldsTheImageLockUntilReleased) {
  TempDir dir;
  const std::string path = dir.Path("disk.img");
  ASSERT_TRUE(io::CreateImage(path, kImageBytes, false).ok());
  auto image = OpenImage(RawSpec(path, io::EngineKind::kSync));
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_TRUE((*image)->locked());
  EXPECT_FALSE(OthersCanLock(path));
  (*image)->Release();
  EXPECT_FALSE((*image)->locked());
  EXPECT_TRUE(OthersCanLock(path));

  ImageSpec unlocked = RawSpec(path, io::EngineKind::kSync);
  unlocked.lock = false;
  auto free_image = OpenImage(unlocked);
  ASSERT_TRUE(free_image.ok()) << free_image.status();
  EXPECT_FALSE((*free_image)->locked());
  EXPECT_TRUE(OthersCanLock(path));
}

TEST(RawImageTest, ItsEnginesServeTheFileAndCheckTheVirtualSize) {
  TempDir dir;
  const std::string path = dir.Path("disk.img");
  ASSERT_TRUE(io::CreateImage(path, kImageBytes, false).ok());
  for (io::EngineKind kind : {io::EngineKind::kUring, io::EngineKind::kSync}) {
    SCOPED_TRACE(io::EngineKindName(kind));
    ImageSpec spec = RawSpec(path, kind);
    spec.lock = false;
    auto image = OpenImage(spec);
    ASSERT_TRUE(image.ok()) << image.status();
    // options.kind is the image's business, not the caller's.
    io::EngineOptions options = Depth(4);
    options.kind = io::EngineKind::kNull;
    auto engine = (*image)->MakeEngine(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->name(), io::EngineKindName(kind));
    Block block;
    std::memset(block.data, kind == io::EngineKind::kUring ? 'u' : 's', kBlock);
    const uint64_t last = kImageBytes - 512 - kBlock;
    EXPECT_EQ(Do(**engine, io::IoOp::kWrite, last, block.data),
              static_cast<int64_t>(kBlock));
    std::string on_disk(kBlock, '\0');
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pread(fd, on_disk.data(), kBlock, static_cast<off_t>(last)),
              static_cast<ssize_t>(kBlock));
    close(fd);
    EXPECT_EQ(on_disk, std::string(block.data, kBlock));
    // Past the virtual size: refused.
    EXPECT_LT(Do(**engine, io::IoOp::kRead, kImageBytes, block.data), 0);

    // An EIO range is checked against the virtual size, named by the image.
    io::EngineOptions beyond = Depth(4);
    beyond.fault = io::FaultRange{kImageBytes / 512, 1};
    auto refused = (*image)->MakeEngine(beyond);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
    EXPECT_NE(refused.status().message().find(path), std::string::npos)
        << refused.status();
    io::EngineOptions last_sector = Depth(4);
    last_sector.fault = io::FaultRange{kImageBytes / 512 - 1, 1};
    EXPECT_TRUE((*image)->MakeEngine(last_sector).ok());
  }
}

TEST(RawImageTest, FlushReachesTheFileSystemOfTheFile) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  const std::string backing = dir.MakeDir("backing");
  ASSERT_TRUE(io::CreateImage(backing + "/disk.img", kImageBytes, false).ok());
  FlushCountingMount image_fs(backing, dir.MakeDir("imagefs"));
  ASSERT_TRUE(image_fs.ok()) << image_fs.Describe();
  {
    auto image =
        OpenImage(RawSpec(image_fs.Path("disk.img"), io::EngineKind::kUring));
    ASSERT_TRUE(image.ok()) << image.status();
    auto engine = (*image)->MakeEngine(Depth(4));
    ASSERT_TRUE(engine.ok()) << engine.status();
    Block block;
    std::memset(block.data, 'f', kBlock);
    ASSERT_EQ(Do(**engine, io::IoOp::kWrite, 0, block.data),
              static_cast<int64_t>(kBlock));
    const auto before = image_fs.CountsOf("disk.img");
    ASSERT_TRUE((*image)->Flush().ok());
    const auto after = image_fs.CountsOf("disk.img");
    EXPECT_EQ(after.fdatasync, before.fdatasync + 1)
        << "Image::Flush returned, but no fdatasync reached the image";
    EXPECT_GE(after.written_at_last_fsync, kBlock)
        << "the flush arrived before the write it must cover";
  }
  {
    // The control: a read-only image keeps nothing to flush.
    ImageSpec spec = RawSpec(image_fs.Path("disk.img"), io::EngineKind::kUring);
    spec.read_only = true;
    auto image = OpenImage(spec);
    ASSERT_TRUE(image.ok()) << image.status();
    const auto before = image_fs.CountsOf("disk.img");
    ASSERT_TRUE((*image)->Flush().ok());
    const auto after = image_fs.CountsOf("disk.img");
    EXPECT_EQ(after.fsync + after.fdatasync, before.fsync + before.fdatasync);
  }
}

TEST(OpenImageFromFilesTest, RebuildsTheSameImageOnOpensOfItsOwn) {
  TempDir dir;
  const std::string path = dir.Path("disk.img");
  ASSERT_TRUE(io::CreateImage(path, kImageBytes, false).ok());
  auto daemon = OpenImage(RawSpec(path, io::EngineKind::kSync));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // The path goes away: the files, not their names, make the image.
  const std::string moved = dir.Path("moved.img");
  ASSERT_EQ(rename(path.c_str(), moved.c_str()), 0);
  auto backend = OpenImageFromFiles(RawSpec(path, io::EngineKind::kSync),
                                    (*daemon)->files());
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->size_bytes(), (*daemon)->size_bytes());
  EXPECT_EQ((*backend)->identity(), (*daemon)->identity());
  EXPECT_EQ((*backend)->name(), path);
  ASSERT_EQ((*backend)->files().size(), 1u);
  const int backend_fd = (*backend)->files()[0];
  EXPECT_NE(backend_fd, (*daemon)->files()[0]);
  EXPECT_EQ(StatOf(backend_fd).ino, StatOf((*daemon)->files()[0]).ino);
  // It joined the daemon's lock: still locked once the daemon lets go.
  EXPECT_TRUE((*backend)->locked());
  (*daemon)->Release();
  EXPECT_FALSE(OthersCanLock(moved));
  (*backend)->Release();
  EXPECT_TRUE(OthersCanLock(moved));

  // What the backend's engine writes, the daemon's reads.
  auto writer = (*backend)->MakeEngine(Depth(2));
  auto reader = (*daemon)->MakeEngine(Depth(2));
  ASSERT_TRUE(writer.ok() && reader.ok());
  Block out;
  Block in;
  std::memset(out.data, 'b', kBlock);
  EXPECT_EQ(Do(**writer, io::IoOp::kWrite, 8192, out.data),
            static_cast<int64_t>(kBlock));
  EXPECT_EQ(Do(**reader, io::IoOp::kRead, 8192, in.data),
            static_cast<int64_t>(kBlock));
  EXPECT_EQ(std::memcmp(in.data, out.data, kBlock), 0);
}

TEST(OpenImageFromFilesTest, RefusesWhatIsNotARawImagesOneFile) {
  TempDir dir;
  const std::string path = dir.Path("disk.img");
  ASSERT_TRUE(io::CreateImage(path, kImageBytes, false).ok());
  ImageSpec spec = RawSpec(path, io::EngineKind::kSync);
  spec.lock = false;
  auto image = OpenImage(spec);
  ASSERT_TRUE(image.ok()) << image.status();
  const int fd = (*image)->files()[0];
  for (const std::vector<int>& fds :
       {std::vector<int>{}, std::vector<int>{fd, fd}}) {
    auto refused = OpenImageFromFiles(spec, fds);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
    EXPECT_NE(refused.status().message().find("one file"), std::string::npos)
        << refused.status();
  }
  ImageSpec rbd = spec;
  rbd.rbd = io::RbdSpec{.pool = "pool", .image = "disk"};
  auto no_files = OpenImageFromFiles(rbd, {fd});
  EXPECT_TRUE(absl::IsInvalidArgument(no_files.status())) << no_files.status();
}

}  // namespace
}  // namespace pvdisk::image
