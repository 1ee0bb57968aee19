#include "image/qcow2/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace pvdisk::image::qcow2 {

absl::Status ReadFully(int fd, uint64_t offset, std::span<uint8_t> out,
                       const std::string& name) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = pread(fd, out.data() + done, out.size() - done,
                      static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return ErrnoError(
          errno, absl::StrCat("cannot read ", name, " at ", offset + done));
    }
    if (n == 0) {  // past the end: zeros
      std::memset(out.data() + done, 0, out.size() - done);
      break;
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status WriteFully(int fd, uint64_t offset, std::span<const uint8_t> data,
                        const std::string& name) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = pwrite(fd, data.data() + done, data.size() - done,
                       static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return ErrnoError(
          n < 0 ? errno : EIO,
          absl::StrCat("cannot write ", name, " at ", offset + done));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::image::qcow2
