// ImageSpec: which image to open and how (open_image.h). Plain data.
#pragma once

#include <optional>
#include <string>

#include "io/engine_factory.h"
#include "io/rbd_spec.h"

namespace pvdisk::image {

// What format an image of files is in (--disk ...,format=).
enum class ImageFormat {
  // Not given: the file's first bytes decide (the qcow2 magic, else raw).
  // A raw image found this way refuses writes that would put a known image
  // header into its first sector (image/image_headers.h).
  kProbe,
  kRaw,    // given: raw, whatever its first bytes say
  kQcow2,  // given: qcow2; a file without the qcow2 magic is refused
};
// "probe", "raw" or "qcow2".
const char* ImageFormatName(ImageFormat format);

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
  // A qcow2 image's internal snapshot to serve instead of its current disk
  // (snapshot=NAME, an id or a name): read-only. Empty: the current disk.
  std::string snapshot;
  // The format; ignored for an RBD image (served raw).
  ImageFormat format = ImageFormat::kProbe;
};

inline const char* ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kRaw:
      return "raw";
    case ImageFormat::kQcow2:
      return "qcow2";
    case ImageFormat::kProbe:
      break;
  }
  return "probe";
}

// Whether `kind` wants the image's files opened with O_DIRECT.
inline bool EngineWantsDirect(io::EngineKind kind) {
  // The null engine never touches the files, so O_DIRECT does not matter.
  return kind != io::EngineKind::kNull;
}

}  // namespace pvdisk::image
