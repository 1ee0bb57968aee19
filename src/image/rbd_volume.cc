#include "image/rbd_volume.h"

#include "absl/strings/str_cat.h"
#include "io/rbd_engine.h"

namespace pvdisk::image {

std::vector<std::pair<std::string, std::string>> RbdVolume::Describe() const {
  const io::RbdSpec& spec = rbd_->spec();
  return {
      {"rbd_pool", spec.pool},
      {"rbd_image", spec.image},
      {"rbd_conf", spec.conf.empty() ? "default" : spec.conf},
      {"rbd_timeout_s", absl::StrCat(spec.timeout_seconds)},
  };
}

absl::Status RbdVolume::CheckServedElsewhere() const {
  if (rbd_->exclusive_lock()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      name_,
      " lacks librbd's exclusive-lock feature, which --backend process needs "
      "(it keeps a killed backend's writes from landing after its "
      "successor's): enable it with 'rbd feature enable ",
      rbd_->spec().pool, "/", rbd_->spec().image,
      " exclusive-lock', or use --backend thread"));
}

absl::StatusOr<std::unique_ptr<io::IoEngine>> RbdVolume::MakeEngine(
    const io::EngineOptions& options) {
  // Checks the options against the RBD image's size and wraps the engine.
  return io::CreateRbdEngine(options, *rbd_);
}

}  // namespace pvdisk::image
