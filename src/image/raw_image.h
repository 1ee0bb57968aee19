// RawImage: a raw image file, byte for byte the disk: its virtual size is
// the file's size, and it is made of that one file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "image/image.h"
#include "io/image_file.h"

namespace pvdisk::image {

class RawImage final : public Image {
 public:
  // Takes over `file`, to be served by `engine`. `locked`: `file` holds the
  // image lock, dropped by Release(). `probed`: the format was probed, not
  // given (see refuses_header_writes).
  RawImage(std::unique_ptr<io::ImageFile> file, io::EngineKind engine,
           bool locked, bool probed = false)
      : file_(std::move(file)),
        engine_(engine),
        locked_(locked),
        probed_(probed) {}
  ~RawImage() override { Release(); }

  const std::string& name() const override { return file_->path(); }
  uint64_t size_bytes() const override { return file_->size_bytes(); }
  bool read_only() const override { return file_->read_only(); }
  bool locked() const override { return locked_; }
  std::string identity() const override;
  const struct stat& attributes() const override {
    return file_->stat_at_open();
  }
  io::EngineKind engine() const override { return engine_; }
  std::vector<int> files() const override { return {file_->fd()}; }
  bool refuses_header_writes() const override {
    return probed_ && !read_only();
  }

  absl::StatusOr<std::unique_ptr<io::IoEngine>> MakeEngine(
      const io::EngineOptions& options) override;
  absl::Status Flush() override;
  void Release() override;

 private:
  std::unique_ptr<io::ImageFile> file_;
  io::EngineKind engine_;
  bool locked_;
  const bool probed_;
};

}  // namespace pvdisk::image
