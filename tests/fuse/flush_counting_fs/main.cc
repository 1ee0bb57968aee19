// flush_counting_fs BACKING_DIR MOUNTPOINT: a FUSE file system that passes
// every file of BACKING_DIR through and counts, per file, the FSYNC, FLUSH
// and FSYNCDIR requests the kernel sends it and the bytes written. The
// counts are the contents of the read-only file MOUNTPOINT/.flush_counts
// (see FlushTally::Render). It runs in the foreground until unmounted
// (fusermount3 -u MOUNTPOINT), then exits 0.
//
// The tests keep a disk image on it to observe that a flush pvdisk was
// asked for reaches the image's own file system. Only what those tests
// need is here: getattr, readdir, open, read, write, truncate, fallocate,
// flush, fsync, fsyncdir, release and statfs.
//
// Files opened with O_DIRECT (as pvdisk opens images) are accepted: the
// kernel sends their reads and writes as they come, and this file system
// opens the backing file without O_DIRECT, because what it must pass on
// is the FSYNC, which it does (fsync or fdatasync of the backing file).

#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "flush_tally.h"

namespace pvdisk::flush_counting_fs {
namespace {

constexpr char kCountsPath[] = "/.flush_counts";
// fuse_file_info::fh of the counts file (a backing descriptor is never it).
constexpr uint64_t kCountsHandle = UINT64_MAX;

int g_backing_dir = -1;
FlushTally g_tally;

bool IsCounts(const char* path) { return std::strcmp(path, kCountsPath) == 0; }

// `path` (always absolute in libfuse's calls) relative to the backing
// directory, for the *at() calls.
const char* Relative(const char* path) {
  return path[1] == '\0' ? "." : path + 1;
}

int Getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  if (IsCounts(path)) {
    *st = {};
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    return 0;
  }
  int rc =
      fi != nullptr && fi->fh != kCountsHandle
          ? fstat(static_cast<int>(fi->fh), st)
          : fstatat(g_backing_dir, Relative(path), st, AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? 0 : -errno;
}

int Readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t,
            fuse_file_info*, fuse_readdir_flags) {
  int fd = openat(g_backing_dir, Relative(path), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -errno;
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    int error = errno;
    close(fd);
    return -error;
  }
  while (dirent* entry = readdir(dir)) {
    fill(buf, entry->d_name, nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  }
  closedir(dir);
  if (std::strcmp(path, "/") == 0) {
    fill(buf, kCountsPath + 1, nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  }
  return 0;
}

int Open(const char* path, fuse_file_info* fi) {
  if (IsCounts(path)) {
    if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EACCES;
    fi->fh = kCountsHandle;
    fi->direct_io = 1;  // every read sees the counts as they are now
    return 0;
  }
  int fd = openat(g_backing_dir, Relative(path),
                  (fi->flags & ~O_DIRECT) | O_CLOEXEC);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  return 0;
}

int Read(const char* path, char* buf, size_t size, off_t offset,
         fuse_file_info* fi) {
  if (fi->fh == kCountsHandle) {
    const std::string text = g_tally.Render();
    if (offset < 0 || static_cast<size_t>(offset) >= text.size()) return 0;
    size_t n = std::min(size, text.size() - static_cast<size_t>(offset));
    std::memcpy(buf, text.data() + offset, n);
    return static_cast<int>(n);
  }
  (void)path;
  ssize_t n = pread(static_cast<int>(fi->fh), buf, size, offset);
  return n < 0 ? -errno : static_cast<int>(n);
}

int Write(const char* path, const char* buf, size_t size, off_t offset,
          fuse_file_info* fi) {
  ssize_t n = pwrite(static_cast<int>(fi->fh), buf, size, offset);
  if (n < 0) return -errno;
  g_tally.RecordWrite(path, static_cast<uint64_t>(n));
  return static_cast<int>(n);
}

int Truncate(const char* path, off_t size, fuse_file_info* fi) {
  if (fi != nullptr && fi->fh != kCountsHandle) {
    return ftruncate(static_cast<int>(fi->fh), size) == 0 ? 0 : -errno;
  }
  int fd = openat(g_backing_dir, Relative(path), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = ftruncate(fd, size) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

int Fallocate(const char*, int mode, off_t offset, off_t length,
              fuse_file_info* fi) {
  if (fi->fh == kCountsHandle) return -EBADF;
  return fallocate(static_cast<int>(fi->fh), mode, offset, length) == 0
             ? 0
             : -errno;
}

int Flush(const char* path, fuse_file_info*) {
  g_tally.RecordFlush(path);
  return 0;
}

int Fsync(const char* path, int datasync, fuse_file_info* fi) {
  // Counted on arrival: the writes answered before it are what it covers.
  g_tally.RecordFsync(path, datasync != 0);
  if (fi->fh == kCountsHandle) return 0;
  const int fd = static_cast<int>(fi->fh);
  return (datasync != 0 ? fdatasync(fd) : fsync(fd)) == 0 ? 0 : -errno;
}

int Fsyncdir(const char* path, int, fuse_file_info*) {
  g_tally.RecordFsyncDir(path);
  return 0;
}

int Release(const char*, fuse_file_info* fi) {
  if (fi->fh != kCountsHandle) close(static_cast<int>(fi->fh));
  return 0;
}

int Statfs(const char*, struct statvfs* st) {
  return fstatvfs(g_backing_dir, st) == 0 ? 0 : -errno;
}

void* Init(fuse_conn_info*, fuse_config* config) {
  // Attributes come from the backing file each time (sizes stay right).
  config->attr_timeout = 0;
  config->entry_timeout = 0;
  return nullptr;
}

fuse_operations Operations() {
  fuse_operations ops = {};
  ops.getattr = Getattr;
  ops.readdir = Readdir;
  ops.open = Open;
  ops.read = Read;
  ops.write = Write;
  ops.truncate = Truncate;
  ops.fallocate = Fallocate;
  ops.flush = Flush;
  ops.fsync = Fsync;
  ops.fsyncdir = Fsyncdir;
  ops.release = Release;
  ops.statfs = Statfs;
  ops.init = Init;
  return ops;
}

}  // namespace
}  // namespace pvdisk::flush_counting_fs

int main(int argc, char** argv) {
  using namespace pvdisk::flush_counting_fs;
  if (argc != 3) {
    std::fprintf(stderr,
                 "flush_counting_fs: expected BACKING_DIR MOUNTPOINT, got %d "
                 "argument(s)\n",
                 argc - 1);
    return 2;
  }
  g_backing_dir = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g_backing_dir < 0) {
    std::fprintf(stderr, "flush_counting_fs: backing directory %s: %s\n",
                 argv[1], std::strerror(errno));
    return 1;
  }
  std::vector<char*> fuse_argv = {
      argv[0], const_cast<char*>("-f"), const_cast<char*>("-o"),
      const_cast<char*>("fsname=flush_counting_fs"), argv[2]};
  const fuse_operations ops = Operations();
  return fuse_main(static_cast<int>(fuse_argv.size()), fuse_argv.data(), &ops,
                   nullptr);
}
