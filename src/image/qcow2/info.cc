#include "image/qcow2/info.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "image/qcow2/chain.h"
#include "image/qcow2/features.h"

namespace pvdisk::image::qcow2 {

absl::StatusOr<std::vector<LayerInfo>> DescribeImage(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ImageChain>> chain = ImageChain::Open(path);
  if (!chain.ok()) return chain.status();
  std::vector<LayerInfo> out;
  for (ChainLayer& layer : (*chain)->layers()) {
    LayerInfo info;
    info.path = layer.path;
    info.format = FormatName(layer.format);
    info.virtual_size = layer.size;
    struct stat st = {};
    if (fstat(layer.fd, &st) != 0) {
      return ErrnoError(errno, absl::StrCat("cannot stat ", layer.path));
    }
    info.file_bytes = static_cast<uint64_t>(st.st_size);
    info.disk_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    if (layer.format == Format::kQcow2) {
      const Qcow2Header& h = layer.qcow2->header();
      info.version = h.version;
      info.cluster_size = h.cluster_size();
      info.refcount_bits = h.refcount_bits();
      absl::StatusOr<uint64_t> allocated = layer.qcow2->AllocatedBytes();
      if (!allocated.ok()) return allocated.status();
      info.allocated_bytes = *allocated;
      info.features = DescribeFeatures(
          h.incompatible_features, h.compatible_features, h.autoclear_features);
      info.backing_file = h.backing_file;
      info.backing_format = h.backing_format;
      info.snapshots = layer.qcow2->snapshots();
    } else {
      info.allocated_bytes = info.disk_bytes;
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace pvdisk::image::qcow2
