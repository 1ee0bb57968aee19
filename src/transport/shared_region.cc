#include "transport/shared_region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace pvdisk::transport {

RegionMapping::~RegionMapping() { munmap(base_, size_); }

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(
    const std::string& name, size_t size) {
  if (size == 0 || size % 4096 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared region size ", size, " is not a multiple of 4096"));
  }
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "memfd_create");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int error = errno;
    close(fd);
    return ErrnoError(error,
                      absl::StrCat("ftruncate of shared region to ", size));
  }
  return std::unique_ptr<SharedRegion>(new SharedRegion(fd, size));
}

SharedRegion::~SharedRegion() { close(fd_); }

absl::StatusOr<std::unique_ptr<RegionMapping>> SharedRegion::Map() const {
  return MapFirst(size_);
}

absl::StatusOr<std::unique_ptr<RegionMapping>> SharedRegion::MapFirst(
    size_t length) const {
  void* base =
      mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base == MAP_FAILED) return ErrnoError(errno, "mmap of shared region");
  return std::make_unique<RegionMapping>(static_cast<uint8_t*>(base), length);
}

}  // namespace pvdisk::transport
