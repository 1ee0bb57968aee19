#include "image/volatile_host_file.h"

#include <sys/uio.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "image/qcow2/file_io.h"

namespace pvdisk::image {
namespace {

class VolatileHostFile final : public qcow2::HostFile {
 public:
  VolatileHostFile(std::shared_ptr<io::VolatileCache> cache, int fd,
                   std::string name)
      : cache_(std::move(cache)), fd_(fd), name_(std::move(name)) {}

  absl::Status Read(uint64_t offset, std::span<uint8_t> out) const override {
    if (cache_->cut()) return LostPower("read");
    // The held data first, then the file: a write-out that lands in
    // between changes nothing the overlay does not cover, and one whose
    // data the overlay missed had left the cache before the file was read.
    io::VolatileCache::Overlay overlay;
    cache_->OverlayFor(offset, out.size(), &overlay);
    if (absl::Status s = qcow2::ReadFully(fd_, offset, out, name_); !s.ok()) {
      return s;
    }
    const iovec iov{out.data(), out.size()};
    io::VolatileCache::Apply(overlay, offset, &iov, 1);
    return absl::OkStatus();
  }

  absl::Status Write(uint64_t offset, std::span<const uint8_t> data) override {
    const iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
    if (const int rc = cache_->Write(offset, &iov, 1, data.size()); rc < 0) {
      return rc == -EIO && cache_->cut()
                 ? LostPower("write")
                 : ErrnoError(-rc, absl::StrCat("cannot write ", name_, " at ",
                                                offset));
    }
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (const int rc = cache_->Flush(); rc < 0) {
      return rc == -EIO && cache_->cut()
                 ? LostPower("flush")
                 : ErrnoError(-rc, absl::StrCat("cannot flush ", name_));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status LostPower(const char* what) const {
    return ErrnoError(EIO, absl::StrCat("cannot ", what, " ", name_,
                                        ": the disk has lost its power"));
  }

  const std::shared_ptr<io::VolatileCache> cache_;
  const int fd_;
  const std::string name_;
};

}  // namespace

std::unique_ptr<qcow2::HostFile> MakeVolatileHostFile(
    std::shared_ptr<io::VolatileCache> cache, int fd, std::string name) {
  return std::make_unique<VolatileHostFile>(std::move(cache), fd,
                                            std::move(name));
}

}  // namespace pvdisk::image
