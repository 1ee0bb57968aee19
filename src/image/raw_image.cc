#include "image/raw_image.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "io/image_lock.h"

namespace pvdisk::image {

std::string RawImage::identity() const {
  return absl::StrCat(file_->stat_at_open().st_ino);
}

absl::StatusOr<std::unique_ptr<io::IoEngine>> RawImage::MakeEngine(
    const io::EngineOptions& options) {
  PVDISK_RETURN_IF_ERROR(
      io::CheckEngineOptions(options, size_sectors(), name()));
  io::EngineOptions file_options = options;
  file_options.kind = engine_;
  PVDISK_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> engine,
                          io::CreateFileEngine(file_options, {file_.get()}));
  return io::WrapEngine(std::move(engine), file_options);
}

absl::Status RawImage::Flush() {
  if (read_only()) return absl::OkStatus();
  while (fdatasync(file_->fd()) != 0) {
    if (errno != EINTR) {
      return ErrnoError(errno,
                        absl::StrCat("fdatasync of ", name(), " failed"));
    }
  }
  return absl::OkStatus();
}

void RawImage::Release() {
  if (!locked_) return;
  io::UnlockImage(file_->fd());
  locked_ = false;
}

}  // namespace pvdisk::image
