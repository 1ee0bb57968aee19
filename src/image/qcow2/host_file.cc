#include "image/qcow2/host_file.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "image/qcow2/file_io.h"

namespace pvdisk::image::qcow2 {
namespace {

class FdHostFile final : public HostFile {
 public:
  FdHostFile(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

  absl::Status Read(uint64_t offset, std::span<uint8_t> out) const override {
    return ReadFully(fd_, offset, out, name_);
  }
  absl::Status Write(uint64_t offset, std::span<const uint8_t> data) override {
    return WriteFully(fd_, offset, data, name_);
  }
  absl::Status Sync() override {
    while (fdatasync(fd_) != 0) {
      if (errno != EINTR) {
        return ErrnoError(errno, absl::StrCat("cannot flush ", name_));
      }
    }
    return absl::OkStatus();
  }

 private:
  const int fd_;
  const std::string name_;
};

}  // namespace

std::unique_ptr<HostFile> MakeFdHostFile(int fd, std::string name) {
  return std::make_unique<FdHostFile>(fd, std::move(name));
}

}  // namespace pvdisk::image::qcow2
