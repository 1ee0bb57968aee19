// ImageSpec: which image to open and how (open_image.h). Plain data.
#pragma once

#include <optional>
#include <string>

#include "io/engine_factory.h"
#include "io/rbd_spec.h"

namespace pvdisk::image {

struct ImageSpec {
  // The image file; for an RBD image only how messages name it (rbd names
  // the image itself). Opened from descriptors, only a label.
  std::string path;
  // An RBD image instead of files.
  std::optional<io::RbdSpec> rbd;
  bool read_only = false;
  // Take the image lock (io/image_lock.h); false: take none.
  bool lock = true;
  // The engine for an image of files (--engine): it decides whether the
  // files are opened with O_DIRECT. An RBD image has its own engine.
  io::EngineKind engine = io::EngineKind::kUring;
  // A qcow2 image's L2 cache in bytes per layer (l2_cache=SIZE); 0: enough
  // tables to map the whole disk, at most 32 MiB.
  uint64_t l2_cache_bytes = 0;
};

// Whether `kind` wants the image's files opened with O_DIRECT.
inline bool EngineWantsDirect(io::EngineKind kind) {
  // The null engine never touches the files, so O_DIRECT does not matter.
  return kind != io::EngineKind::kNull;
}

}  // namespace pvdisk::image
