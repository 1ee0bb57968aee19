// Test helpers: a scratch directory and page-aligned buffers (O_DIRECT).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::io::testing {

// The shared scratch directory (tests/common/temp_dir.h), with this suite's
// prefix.
class TempDir : public pvdisk::testing::TempDir {
 public:
  TempDir() : pvdisk::testing::TempDir("pvdisk_io_test") {}
};

// Writes `size` bytes of `fill` to a new file at `path`.
inline void WriteFile(const std::string& path, size_t size, char fill = 'x') {
  std::string data(size, fill);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ASSERT_EQ(write(fd, data.data(), data.size()),
            static_cast<ssize_t>(data.size()));
  close(fd);
}

// Reads `size` bytes at `offset` of `path` through the page cache.
inline std::string ReadFileRange(const std::string& path, uint64_t offset,
                                 size_t size) {
  std::string data(size, '\0');
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path << ": " << std::strerror(errno);
  if (fd < 0) return "";
  ssize_t n = pread(fd, data.data(), size, static_cast<off_t>(offset));
  close(fd);
  EXPECT_EQ(n, static_cast<ssize_t>(size));
  return data;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// A zero-filled buffer aligned to 4096 bytes, as O_DIRECT needs.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t size)
      : size_(size),
        data_(static_cast<char*>(std::aligned_alloc(4096, RoundUp(size)))) {
    std::memset(data_.get(), 0, RoundUp(size));
  }
  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::string str() const { return std::string(data_.get(), size_); }

 private:
  static size_t RoundUp(size_t size) { return (size + 4095) / 4096 * 4096; }
  size_t size_;
  std::unique_ptr<char, FreeDeleter> data_;
};

}  // namespace pvdisk::io::testing
