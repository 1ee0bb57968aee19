// RbdVolume: an RBD image as a disk image. Its virtual size is the RBD
// image's; it has no local files; its shared state is io::RbdImage (the
// cluster connection and librbd's handle), which every rbd engine uses.
//
// Ownership: pvdisk takes no lock of its own on an RBD image (lock= does not
// apply); librbd's exclusive lock orders its writers. A backend process
// opens the image again by its name (image::OpenSameImage, checked by image
// id) and takes the exclusive lock with its first write; the daemon's open
// does no I/O and so never holds it. A successor of a killed backend gets
// the lock only by blocklisting the dead one at the cluster, which is what
// keeps the dead one's writes from landing after the successor's: hence
// --backend process needs the exclusive-lock feature (CheckServedElsewhere).
// librbd breaks a dead owner's lock only once the cluster has noticed the
// death (its watch times out, 30 s), so the daemon breaks it itself as soon
// as it has reaped the backend (FenceDeadWriter, with the dead backend's
// client address, its writer()).
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
  absl::Status CheckServedElsewhere() const override;
  std::string writer() const override { return rbd_->client_address(); }
  absl::Status FenceDeadWriter(const std::string& writer) override {
    return rbd_->FenceDeadClient(writer);
  }
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
