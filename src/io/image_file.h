// An open raw disk image: its file descriptor, size and whether O_DIRECT is
// in use. Control path only.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pvdisk::io {

class ImageFile {
 public:
  // What the file holds. kRawDisk: the disk byte for byte, so its size must
  // be a positive multiple of 512 and requests must lie within it. kLayer:
  // one file of a format (qcow2) whose mapping the format does: any size,
  // and requests may reach past the end, where a writable layer grows as
  // the format appends clusters.
  enum class Content { kRawDisk, kLayer };

  // Opens `path` read-write (or read-only). With `want_direct`, tries
  // O_DIRECT and keeps it only if a 512-byte aligned read at offset 0
  // succeeds; otherwise falls back to buffered I/O and says why in
  // direct_note(). Errors name the path: missing, not a regular file,
  // unreadable, size not a multiple of 512.
  static absl::StatusOr<std::unique_ptr<ImageFile>> Open(
      const std::string& path, bool read_only, bool want_direct,
      Content content = Content::kRawDisk);
  // Opens the file open as `fd` once more, through /proc/self/fd/`fd`: a
  // new open file description (its own OFD locks, its own O_DIRECT) of the
  // same inode, whatever has become of the file's name since. `fd` stays
  // open and the caller's. `label` names the image in messages and path();
  // nothing is opened by it. O_DIRECT and the checks as for Open().
  static absl::StatusOr<std::unique_ptr<ImageFile>> Reopen(
      int fd, const std::string& label, bool read_only, bool want_direct,
      Content content = Content::kRawDisk);
  ~ImageFile();
  ImageFile(const ImageFile&) = delete;
  ImageFile& operator=(const ImageFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size_bytes() const { return size_bytes_; }
  uint64_t size_sectors() const { return size_bytes_ / 512; }
  // The end of the range engines accept requests in: the size for a raw
  // disk, the largest offset a qcow2 table can name for a layer.
  uint64_t request_limit_bytes() const { return request_limit_bytes_; }
  bool direct() const { return direct_; }
  bool read_only() const { return read_only_; }
  const std::string& path() const { return path_; }
  // "O_DIRECT", or "buffered (…reason…)".
  const std::string& direct_note() const { return direct_note_; }
  // fstat() of the open image, taken by Open(): its owner, group, mode and
  // times as they were when the image was opened.
  const struct stat& stat_at_open() const { return stat_at_open_; }

 private:
  // Checks the opened `raw_fd` (taking it over) and settles O_DIRECT.
  static absl::StatusOr<std::unique_ptr<ImageFile>> Finish(
      int raw_fd, const std::string& path, bool read_only, bool direct,
      std::string note, Content content);

  ImageFile(int fd, const struct stat& st, bool direct, bool read_only,
            std::string path, std::string note, uint64_t request_limit)
      : fd_(fd),
        size_bytes_(static_cast<uint64_t>(st.st_size)),
        request_limit_bytes_(request_limit),
        stat_at_open_(st),
        direct_(direct),
        read_only_(read_only),
        path_(std::move(path)),
        direct_note_(std::move(note)) {}

  int fd_;
  uint64_t size_bytes_;
  uint64_t request_limit_bytes_;
  struct stat stat_at_open_;
  bool direct_;
  bool read_only_;
  std::string path_;
  std::string direct_note_;
};

// Creates a sparse raw image of `size_bytes` (a multiple of 512) at `path`.
// Refuses an existing file unless `force`; never leaves a partial file behind.
absl::Status CreateImage(const std::string& path, uint64_t size_bytes,
                         bool force);

}  // namespace pvdisk::io
