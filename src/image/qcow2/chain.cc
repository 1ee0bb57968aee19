#include "image/qcow2/chain.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/errno_status.h"
#include "image/qcow2/compressed.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/file_io.h"
#include "image/qcow2/owner_access.h"

namespace pvdisk::image::qcow2 {

const char* FormatName(Format format) {
  return format == Format::kQcow2 ? "qcow2" : "raw";
}

std::string ResolveBackingPath(const std::string& image_path,
                               const std::string& backing_name) {
  if (!backing_name.empty() && backing_name[0] == '/') return backing_name;
  const size_t slash = image_path.find_last_of('/');
  if (slash == std::string::npos) return backing_name;
  return image_path.substr(0, slash + 1) + backing_name;
}

absl::StatusOr<Format> ProbeFormat(int fd, const std::string& name) {
  uint8_t magic[4] = {};
  ssize_t n = pread(fd, magic, sizeof(magic), 0);
  if (n < 0) return ErrnoError(errno, absl::StrCat("cannot read ", name));
  if (n == 4 && LoadBe32(magic) == kQcow2Magic) return Format::kQcow2;
  return Format::kRaw;
}

ImageChain::~ImageChain() {
  for (ChainLayer& layer : layers_) {
    layer.qcow2.reset();
    if (layer.fd >= 0) close(layer.fd);
  }
}

absl::StatusOr<std::unique_ptr<ImageChain>> ImageChain::Open(
    const std::string& path, const ChainOptions& options) {
  return Build(path, options, [](size_t, const std::string& name, int flags) {
    return open(name.c_str(), flags);
  });
}

absl::StatusOr<std::unique_ptr<ImageChain>> ImageChain::OpenFiles(
    const std::vector<int>& fds, const std::string& path,
    const ChainOptions& options, bool rest_by_name) {
  absl::StatusOr<std::unique_ptr<ImageChain>> chain = Build(
      path, options, [&](size_t index, const std::string& name, int flags) {
        if (index >= fds.size()) {
          if (rest_by_name) return open(name.c_str(), flags);
          errno = ENOENT;
          return -1;
        }
        return open(absl::StrCat("/proc/self/fd/", fds[index]).c_str(), flags);
      });
  if (chain.ok() && !rest_by_name && (*chain)->layers_.size() != fds.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", path, " has ", (*chain)->layers_.size(),
                     " layers, but ", fds.size(), " files were given"));
  }
  return chain;
}

absl::StatusOr<std::unique_ptr<ImageChain>> ImageChain::Build(
    const std::string& path, const ChainOptions& options,
    absl::FunctionRef<int(size_t, const std::string&, int)> open_layer) {
  std::unique_ptr<ImageChain> chain(new ImageChain());
  std::string next = path;
  std::string format_hint;  // from the layer above's backing format
  std::vector<std::string> names;
  FileUser owner;  // the top image's owner, who must be able to read the rest
  while (!next.empty()) {
    const bool top = chain->layers_.empty();
    if (chain->layers_.size() >= kMaxChainDepth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backing chain of ", path, " is deeper than ", kMaxChainDepth,
          " images: ", absl::StrJoin(names, " -> ")));
    }
    // A backing file is checked before it is opened: opening a device or a
    // FIFO a header names could do something, or block.
    if (!top) {
      struct stat before = {};
      if (stat(next.c_str(), &before) == 0) {
        if (absl::Status s = CheckOwnerCanRead(owner, before, next, path);
            !s.ok()) {
          return s;
        }
        if (!S_ISREG(before.st_mode) && !S_ISBLK(before.st_mode)) {
          return absl::InvalidArgumentError(
              absl::StrCat(next, " is not a regular file or block device"));
        }
      }
    }
    const int flags = (top && options.writable_top ? O_RDWR : O_RDONLY) |
                      O_CLOEXEC | O_NONBLOCK;
    int fd = open_layer(chain->layers_.size(), next, flags);
    if (fd < 0) {
      const int error = errno;
      if (error == ENOENT) {
        if (top)
          return absl::NotFoundError(absl::StrCat(next, " does not exist"));
        return absl::NotFoundError(absl::StrCat("backing file ", next, " of ",
                                                chain->layers_.back().path,
                                                " does not exist"));
      }
      return ErrnoError(error, absl::StrCat("cannot open ", next));
    }
    ChainLayer& layer = chain->layers_.emplace_back();
    layer.fd = fd;
    layer.path = next;
    char resolved[PATH_MAX];
    layer.realpath = realpath(next.c_str(), resolved) ? resolved : next;
    names.push_back(next);
    for (size_t i = 0; i + 1 < chain->layers_.size(); ++i) {
      if (chain->layers_[i].realpath == layer.realpath) {
        return absl::InvalidArgumentError(
            absl::StrCat("backing chain of ", path,
                         " loops: ", absl::StrJoin(names, " -> ")));
      }
    }
    struct stat st = {};
    if (fstat(fd, &st) != 0) {
      return ErrnoError(errno, absl::StrCat("cannot stat ", next));
    }
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(next, " is not a regular file or block device"));
    }
    // Nothing of a backing file is read before its reader is checked.
    if (top) {
      owner = OwnerOf(st);
    } else if (absl::Status s = CheckOwnerCanRead(owner, st, next, path);
               !s.ok()) {
      return s;
    }
    if (format_hint == "qcow2") {
      layer.format = Format::kQcow2;
    } else if (format_hint == "raw") {
      layer.format = Format::kRaw;
    } else if (!format_hint.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          chain->layers_[chain->layers_.size() - 2].path, ": backing format '",
          format_hint, "' is not supported; allowed qcow2 and raw"));
    } else {
      absl::StatusOr<Format> probed = ProbeFormat(fd, next);
      if (!probed.ok()) return probed.status();
      layer.format = *probed;
    }
    next.clear();
    format_hint.clear();
    if (layer.format == Format::kRaw) {
      layer.size = static_cast<uint64_t>(st.st_size);
      break;
    }
    absl::StatusOr<std::unique_ptr<Qcow2File>> file = Qcow2File::Open(
        fd, layer.path, top && options.writable_top, options.l2_cache_tables,
        options.l2_cache_bytes, top ? options.snapshot : std::string());
    if (!file.ok()) return file.status();
    layer.qcow2 = std::move(*file);
    layer.size = layer.qcow2->header().size;
    if (!layer.qcow2->header().backing_file.empty()) {
      next = ResolveBackingPath(layer.path, layer.qcow2->header().backing_file);
      format_hint = layer.qcow2->header().backing_format;
    }
  }
  return chain;
}

absl::Status ImageChain::Read(uint64_t voff, std::span<uint8_t> out,
                              size_t index) {
  if (index >= layers_.size()) {
    std::memset(out.data(), 0, out.size());
    return absl::OkStatus();
  }
  ChainLayer& layer = layers_[index];
  size_t done = 0;
  while (done < out.size()) {
    const uint64_t at = voff + done;
    std::span<uint8_t> rest = out.subspan(done);
    if (at >= layer.size) {  // past this layer's disk: zeros
      std::memset(rest.data(), 0, rest.size());
      return absl::OkStatus();
    }
    if (layer.format == Format::kRaw) {
      const size_t n = std::min<uint64_t>(rest.size(), layer.size - at);
      if (absl::Status s =
              ReadFully(layer.fd, at, rest.subspan(0, n), layer.path);
          !s.ok()) {
        return s;
      }
      done += n;
      continue;
    }
    absl::StatusOr<Mapping> m = layer.qcow2->Map(at);
    if (!m.ok()) return m.status();
    const size_t n = std::min<uint64_t>(rest.size(), m->bytes);
    std::span<uint8_t> piece = rest.subspan(0, n);
    switch (m->kind) {
      case L2Kind::kData:
        if (absl::Status s = layer.qcow2->ReadHost(m->host_offset, piece);
            !s.ok()) {
          return s;
        }
        break;
      case L2Kind::kZero:
        std::memset(piece.data(), 0, n);
        break;
      case L2Kind::kUnallocated:
        if (absl::Status s = Read(at, piece, index + 1); !s.ok()) return s;
        break;
      case L2Kind::kCompressed: {
        const uint64_t cluster_size = layer.qcow2->header().cluster_size();
        std::vector<uint8_t> cluster(cluster_size), scratch;
        if (absl::Status s = ReadCompressed(index, *m, scratch, cluster);
            !s.ok()) {
          return s;
        }
        std::memcpy(piece.data(), cluster.data() + at % cluster_size, n);
        break;
      }
    }
    done += n;
  }
  return absl::OkStatus();
}

absl::Status ImageChain::ReadCompressed(size_t layer, const Mapping& m,
                                        std::vector<uint8_t>& scratch,
                                        std::span<uint8_t> cluster) {
  const Qcow2File& file = *layers_[layer].qcow2;
  return ReadCompressedCluster(
      layers_[layer].path, file.header().compression_type,
      CompressedExtent{m.host_offset, m.compressed_bytes},
      [&](uint64_t offset, std::span<uint8_t> out) {
        return file.ReadHost(offset, out);
      },
      scratch, cluster);
}

}  // namespace pvdisk::image::qcow2
