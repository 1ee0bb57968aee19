// ImageFile::Open and Reopen: what they accept, and the messages for what
// they refuse.
#include "io/image_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
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

// Reopen follows the open file, not its name: after the file was renamed
// and another one put at its path, and after it was removed, the new open
// is of the original inode, has the asked access, and is an open file
// description of its own (its OFD lock is seen from the first one).
TEST(ImageFileTest, ReopenFollowsTheOpenFileNotItsPath) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  const std::string moved = dir.File("moved.img");
  WriteFile(path, 8192, 'o');
  auto first = ImageFile::Open(path, /*read_only=*/false, false);
  ASSERT_TRUE(first.ok()) << first.status();
  struct stat original = {};
  ASSERT_EQ(fstat((*first)->fd(), &original), 0);
  ASSERT_EQ(rename(path.c_str(), moved.c_str()), 0);
  WriteFile(path, 4096, 'n');

  auto again = ImageFile::Reopen((*first)->fd(), "the label", false, true);
  ASSERT_TRUE(again.ok()) << again.status();
  struct stat reopened = {};
  ASSERT_EQ(fstat((*again)->fd(), &reopened), 0);
  EXPECT_EQ(reopened.st_ino, original.st_ino);
  EXPECT_EQ(reopened.st_dev, original.st_dev);
  EXPECT_EQ((*again)->size_bytes(), 8192u);
  EXPECT_EQ((*again)->path(), "the label");
  const int flags = fcntl((*again)->fd(), F_GETFL);
  EXPECT_EQ(flags & O_ACCMODE, O_RDWR);
  EXPECT_EQ((flags & O_DIRECT) != 0, (*again)->direct());

  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = 7;
  lock.l_len = 1;
  ASSERT_EQ(fcntl((*again)->fd(), F_OFD_SETLK, &lock), 0);
  struct flock probe = lock;
  ASSERT_EQ(fcntl((*first)->fd(), F_OFD_GETLK, &probe), 0);
  EXPECT_EQ(probe.l_type, F_WRLCK) << "the reopen shares the first's OFD";

  ASSERT_EQ(unlink(moved.c_str()), 0);
  auto removed = ImageFile::Reopen((*first)->fd(), "gone", true, false);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE((*removed)->read_only());
  EXPECT_EQ(fcntl((*removed)->fd(), F_GETFL) & O_ACCMODE, O_RDONLY);
  char byte = 0;
  ASSERT_EQ(pread((*removed)->fd(), &byte, 1, 0), 1);
  EXPECT_EQ(byte, 'o');
}

TEST(ImageFileTest, ReopenRefusesWhatIsNotARegularFile) {
  TempDir dir;
  int fd = open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto image = ImageFile::Reopen(fd, "somewhere", true, false);
  close(fd);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().message(), "image somewhere is not a regular file");
}

}  // namespace
}  // namespace pvdisk::io::testing
