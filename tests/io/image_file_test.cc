// ImageFile::Open: what it accepts, and the messages for what it refuses.
#include "io/image_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

TEST(ImageFileTest, OpensARawImage) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  WriteFile(path, 8192);
  auto image = ImageFile::Open(path, /*read_only=*/false, /*want_direct=*/true);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ((*image)->size_bytes(), 8192u);
  EXPECT_EQ((*image)->size_sectors(), 16u);
  EXPECT_EQ((*image)->path(), path);
  EXPECT_FALSE((*image)->read_only());
  EXPECT_GE((*image)->fd(), 0);
  const int flags = fcntl((*image)->fd(), F_GETFL);
  EXPECT_EQ(flags & O_ACCMODE, O_RDWR);
  // The note always matches what the descriptor does.
  EXPECT_EQ((flags & O_DIRECT) != 0, (*image)->direct());
  if ((*image)->direct()) {
    EXPECT_EQ((*image)->direct_note(), "O_DIRECT");
  } else {
    EXPECT_EQ((*image)->direct_note().rfind("buffered (", 0), 0u)
        << (*image)->direct_note();
  }
}

TEST(ImageFileTest, BufferedWhenNotAskedForDirect) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  WriteFile(path, 512);
  auto image = ImageFile::Open(path, /*read_only=*/true, /*want_direct=*/false);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_FALSE((*image)->direct());
  EXPECT_TRUE((*image)->read_only());
  EXPECT_EQ((*image)->direct_note().rfind("buffered", 0), 0u);
  const int flags = fcntl((*image)->fd(), F_GETFL);
  EXPECT_EQ(flags & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(flags & O_DIRECT, 0);
}

TEST(ImageFileTest, MissingFile) {
  TempDir dir;
  const std::string path = dir.File("nope.img");
  auto image = ImageFile::Open(path, false, true);
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::IsNotFound(image.status()));
  EXPECT_EQ(image.status().message(), "image " + path + " does not exist");
}

TEST(ImageFileTest, Directory) {
  TempDir dir;
  auto image = ImageFile::Open(dir.path(), false, true);
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(image.status()));
  EXPECT_EQ(image.status().message(),
            "image " + dir.path() + " is not a regular file");
}

TEST(ImageFileTest, SizeNotAMultipleOf512) {
  TempDir dir;
  const std::string path = dir.File("odd.img");
  WriteFile(path, 1000);
  auto image = ImageFile::Open(path, false, true);
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(image.status()));
  EXPECT_EQ(
      image.status().message(),
      "image " + path + " has size 1000, which is not a multiple of 512 bytes");
}

TEST(ImageFileTest, EmptyFile) {
  TempDir dir;
  const std::string path = dir.File("empty.img");
  WriteFile(path, 0);
  auto image = ImageFile::Open(path, false, false);
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(image.status()));
  EXPECT_NE(image.status().message().find("image " + path + " has size 0"),
            std::string::npos)
      << image.status();
}

TEST(ImageFileTest, ClosesItsDescriptor) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  WriteFile(path, 4096);
  int fd;
  {
    auto image = ImageFile::Open(path, false, false);
    ASSERT_TRUE(image.ok());
    fd = (*image)->fd();
  }
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

}  // namespace
}  // namespace pvdisk::io::testing
