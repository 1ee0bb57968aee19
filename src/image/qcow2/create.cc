#include "image/qcow2/create.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <climits>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "image/qcow2/chain.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/file_io.h"
#include "image/qcow2/header.h"

namespace pvdisk::image::qcow2 {
namespace {

uint64_t DivRoundUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::Status CreateQcow2(const std::string& path, CreateOptions options) {
  const uint64_t cluster = options.cluster_size;
  if (cluster < (1u << kMinClusterBits) || cluster > (1u << kMaxClusterBits) ||
      !std::has_single_bit(cluster)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster size ", cluster,
        " is not allowed; allowed a power of two from 512 to 2M (2097152)"));
  }
  if (options.extended_l2 &&
      (cluster < (1u << kMinExtendedL2ClusterBits) || options.version < 3)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extended L2 entries with ", cluster, "-byte clusters (version ",
        options.version,
        "): allowed with version 3 and clusters of 16K (16384) to 2M"));
  }
  Qcow2Header h;
  h.version = options.version;
  if (options.extended_l2) h.incompatible_features |= kIncompatExtendedL2;
  h.cluster_bits = static_cast<uint32_t>(std::countr_zero(cluster));
  h.refcount_order = 4;

  if (!options.backing.empty()) {
    const std::string resolved = ResolveBackingPath(path, options.backing);
    char real_backing[PATH_MAX];
    char real_target[PATH_MAX];
    if (realpath(resolved.c_str(), real_backing) != nullptr &&
        realpath(path.c_str(), real_target) != nullptr &&
        std::string(real_backing) == real_target) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backing file ", options.backing, " is the image ", path, " itself"));
    }
    if (access(resolved.c_str(), F_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(
          "backing file ", options.backing, " does not exist",
          resolved == options.backing
              ? std::string()
              : absl::StrCat(" (names are relative to the image's folder: ",
                             resolved, ")")));
    }
    absl::StatusOr<std::unique_ptr<ImageChain>> chain =
        ImageChain::Open(resolved);
    if (!chain.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backing file ", options.backing, ": ", chain.status().message()));
    }
    // Overwriting a file deeper in the chain would close a loop.
    if (realpath(path.c_str(), real_target) != nullptr) {
      for (const ChainLayer& layer : (*chain)->layers()) {
        if (layer.realpath == real_target) {
          return absl::InvalidArgumentError(absl::StrCat(
              "backing file ", options.backing, " has the image ", path,
              " in its own backing chain: the chain would loop"));
        }
      }
    }
    h.backing_file = options.backing;
    h.backing_format = FormatName((*chain)->layers().front().format);
    if (options.size == 0) options.size = (*chain)->size();
  }
  if (options.size == 0 || options.size % 512 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("image size ", options.size, " for ", path,
                     " is not a positive multiple of 512 bytes"));
  }
  h.size = options.size;
  const uint64_t l1_entries =
      L1EntriesFor(h.size, h.cluster_bits, h.extended_l2());
  if (l1_entries > kMaxL1Entries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image size ", h.size, " needs an L1 table of ", l1_entries,
        " entries with ", cluster, "-byte clusters; allowed at most ",
        kMaxL1Entries, ": use larger clusters"));
  }
  h.l1_size = static_cast<uint32_t>(l1_entries);
  // Clusters: the header, the refcount table, its blocks, the L1 table.
  const uint64_t l1_clusters = DivRoundUp(l1_entries * 8, cluster);
  const uint64_t per_block = h.refcounts_per_block();
  uint64_t blocks = 1, table_clusters = 1;
  for (int i = 0; i < 8; ++i) {
    const uint64_t total = 1 + table_clusters + blocks + l1_clusters;
    blocks = DivRoundUp(total, per_block);
    table_clusters = std::max<uint64_t>(1, DivRoundUp(blocks * 8, cluster));
  }
  const uint64_t total = 1 + table_clusters + blocks + l1_clusters;
  if (table_clusters * cluster > kMaxRefcountTableBytes ||
      blocks * per_block < total) {
    return absl::InvalidArgumentError(
        absl::StrCat("image size ", h.size, " needs too much metadata with ",
                     cluster, "-byte clusters: use larger clusters"));
  }
  h.refcount_table_offset = cluster;
  h.refcount_table_clusters = static_cast<uint32_t>(table_clusters);
  const uint64_t blocks_offset = cluster * (1 + table_clusters);
  h.l1_table_offset = blocks_offset + blocks * cluster;
  absl::StatusOr<std::vector<uint8_t>> first = EncodeQcow2Header(h);
  if (!first.ok()) return first.status();

  struct stat st = {};
  const bool existed = lstat(path.c_str(), &st) == 0;
  if (existed && !options.force) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, " already exists; pass --force to overwrite it"));
  }
  if (existed && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " exists and is not a regular file; refusing to overwrite it"));
  }
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
                    (options.force ? O_TRUNC : O_EXCL);
  int fd = open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(path, " already exists; pass --force to overwrite it"));
    }
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          "cannot create image ", path, ": its directory does not exist"));
    }
    return ErrnoError(error, absl::StrCat("cannot create image ", path));
  }
  auto fail = [&](absl::Status status) {
    close(fd);
    unlink(path.c_str());
    return status;
  };
  // The refcount table names each block; the blocks count every metadata
  // cluster once; the L1 table stays zero (a sparse hole).
  std::vector<uint8_t> table(table_clusters * cluster, 0);
  for (uint64_t b = 0; b < blocks; ++b) {
    StoreBe64(table.data() + 8 * b, blocks_offset + b * cluster);
  }
  std::vector<uint8_t> counts(blocks * cluster, 0);
  for (uint64_t c = 0; c < total; ++c) {
    SetRefcount(
        std::span<uint8_t>(counts.data() + (c / per_block) * cluster, cluster),
        c % per_block, h.refcount_order, 1);
  }
  absl::Status s = WriteFully(fd, 0, *first, path);
  if (s.ok()) s = WriteFully(fd, h.refcount_table_offset, table, path);
  if (s.ok()) s = WriteFully(fd, blocks_offset, counts, path);
  if (s.ok() && ftruncate(fd, static_cast<off_t>(total * cluster)) != 0) {
    s = ErrnoError(errno, absl::StrCat("cannot size image ", path));
  }
  if (s.ok() && fdatasync(fd) != 0) {
    s = ErrnoError(errno, absl::StrCat("cannot flush image ", path));
  }
  if (!s.ok()) return fail(s);
  if (close(fd) != 0) {
    unlink(path.c_str());
    return ErrnoError(errno, absl::StrCat("cannot finish image ", path));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::image::qcow2
