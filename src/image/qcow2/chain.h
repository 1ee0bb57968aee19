// ImageChain: an image and its backing files, top first, each raw or
// qcow2, opened by path; and the synchronous read of a virtual range
// through it (a cluster a qcow2 layer does not allocate reads from the
// next layer; past a layer's virtual size, and below the last layer, the
// disk reads zeros).
//
// Backing names are resolved as QEMU does: an absolute name as it is, a
// relative one against the directory of the image that names it. A layer's
// format is its backing format extension ("qcow2" or "raw"); without one it
// is probed (the qcow2 magic, else raw). The chain is refused, with one line
// naming the files, if a backing file is missing, if it comes back to a file
// already in it (a loop), if it is deeper than kMaxChainDepth, or if the top
// image's owner could not read a backing file (owner_access.h: a header
// must not show its author a file they could not read; checked before
// anything of that file is read).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "image/qcow2/qcow2_file.h"

namespace pvdisk::image::qcow2 {

inline constexpr size_t kMaxChainDepth = 16;

enum class Format { kRaw, kQcow2 };
const char* FormatName(Format format);

struct ChainLayer {
  std::string path;      // as named (the top: as given; others resolved)
  std::string realpath;  // canonical, for loop detection
  Format format = Format::kRaw;
  int fd = -1;                       // owned by the chain
  uint64_t size = 0;                 // virtual size (a raw file's size)
  std::unique_ptr<Qcow2File> qcow2;  // kQcow2 only
};

struct ChainOptions {
  bool writable_top = false;  // open the top layer read-write
  size_t l2_cache_tables = kDefaultL2CacheTables;
  // When not 0, each qcow2 layer's L2 cache in bytes instead
  // (Qcow2File::Open).
  uint64_t l2_cache_bytes = 0;
  // When not empty, the top layer serves this internal snapshot (an id or
  // a name) instead of its current disk; writable_top must be false.
  std::string snapshot;
};

class ImageChain {
 public:
  static absl::StatusOr<std::unique_ptr<ImageChain>> Open(
      const std::string& path, const ChainOptions& options = {});
  // The chain of the image at `path` from files already open as `fds`, top
  // first (another process's opens of the chain's layers): each is opened
  // again through /proc/self/fd, and there must be exactly one per layer
  // the headers name; with `rest_by_name`, the layers below `fds` are
  // opened by their names, resolved against `path`, as Open does.
  static absl::StatusOr<std::unique_ptr<ImageChain>> OpenFiles(
      const std::vector<int>& fds, const std::string& path,
      const ChainOptions& options = {}, bool rest_by_name = false);
  ~ImageChain();
  ImageChain(const ImageChain&) = delete;
  ImageChain& operator=(const ImageChain&) = delete;

  std::vector<ChainLayer>& layers() { return layers_; }
  uint64_t size() const { return layers_.front().size; }

  // Reads virtual bytes [voff, voff + out.size()) of layer `layer` (0: the
  // disk) into `out`. A range the metadata refuses, or a compressed
  // cluster that does not inflate, is an error (DataLoss), as EIO would be
  // to a disk's reader.
  absl::Status Read(uint64_t voff, std::span<uint8_t> out, size_t layer = 0);
  // Inflates the compressed cluster `m` (kCompressed) of qcow2 layer
  // `layer` into `cluster` (a whole cluster), its compressed bytes read
  // into `scratch` with pread. Any thread (no state but the files).
  absl::Status ReadCompressed(size_t layer, const Mapping& m,
                              std::vector<uint8_t>& scratch,
                              std::span<uint8_t> cluster);

 private:
  ImageChain() = default;
  // Opens the chain from `path` down, each layer's file by `open_layer`
  // (its index, its name, the open(2) flags; returns a descriptor, or -1
  // with errno).
  static absl::StatusOr<std::unique_ptr<ImageChain>> Build(
      const std::string& path, const ChainOptions& options,
      absl::FunctionRef<int(size_t, const std::string&, int)> open_layer);
  std::vector<ChainLayer> layers_;
};

// Whether the file at `fd` starts with the qcow2 magic.
absl::StatusOr<Format> ProbeFormat(int fd, const std::string& name);

// The path a backing name refers to from the image at `image_path`.
std::string ResolveBackingPath(const std::string& image_path,
                               const std::string& backing_name);

}  // namespace pvdisk::image::qcow2
