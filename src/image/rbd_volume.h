// RbdVolume: an RBD image as a disk image. Its virtual size is the RBD
// image's; it has no local files; its shared state is io::RbdImage (the
// cluster connection and librbd's handle), which every rbd engine uses.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "image/image.h"
#include "io/rbd_image.h"

namespace pvdisk::image {

class RbdVolume final : public Image {
 public:
  explicit RbdVolume(std::unique_ptr<io::RbdImage> rbd)
      : rbd_(std::move(rbd)), name_(rbd_->spec().Name()) {}

  const std::string& name() const override { return name_; }
  uint64_t size_bytes() const override { return rbd_->size_bytes(); }
  bool read_only() const override { return rbd_->read_only(); }
  bool locked() const override { return false; }
  std::string identity() const override { return rbd_->id(); }
  const struct stat& attributes() const override { return rbd_->attributes(); }
  io::EngineKind engine() const override { return io::EngineKind::kRbd; }
  std::vector<int> files() const override { return {}; }
  std::vector<std::pair<std::string, std::string>> Describe() const override;

  absl::StatusOr<std::unique_ptr<io::IoEngine>> MakeEngine(
      const io::EngineOptions& options) override;
  absl::Status Flush() override { return rbd_->Flush(); }
  void Release() override {}

 private:
  std::unique_ptr<io::RbdImage> rbd_;
  std::string name_;
};

}  // namespace pvdisk::image
