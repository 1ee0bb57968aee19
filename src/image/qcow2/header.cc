#include "image/qcow2/header.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/features.h"

namespace pvdisk::image::qcow2 {
namespace {

absl::Status Bad(const std::string& image, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(image, ": qcow2 ", what));
}

// A table's offset: a nonzero multiple of the cluster size.
absl::Status CheckTableOffset(const std::string& image, const char* field,
                              uint64_t offset, uint64_t cluster) {
  if (offset != 0 && offset % cluster == 0) return absl::OkStatus();
  return Bad(image, absl::StrCat(field, " ", offset,
                                 " is not a nonzero multiple of the cluster "
                                 "size ",
                                 cluster));
}

// Reads the header extensions from `start` up to `end` (exclusive; the
// backing file name or the end of the first cluster), into `header`.
absl::Status ParseExtensions(std::span<const uint8_t> bytes, uint64_t start,
                             uint64_t end, const std::string& image,
                             Qcow2Header& header) {
  uint64_t at = start;
  while (at < end) {
    if (end - at < 8) {
      return Bad(image, absl::StrCat("header extension at byte ", at,
                                     " does not fit before byte ", end));
    }
    const uint32_t type = LoadBe32(bytes.data() + at);
    const uint32_t length = LoadBe32(bytes.data() + at + 4);
    if (type == kExtEnd) return absl::OkStatus();
    const uint64_t data = at + 8;
    const uint64_t padded = (uint64_t{length} + 7) & ~uint64_t{7};
    if (padded > end - data) {
      return Bad(image, absl::StrCat("header extension 0x", absl::Hex(type),
                                     " of ", length, " bytes at byte ", at,
                                     " runs past byte ", end));
    }
    const uint8_t* p = bytes.data() + data;
    if (type == kExtBackingFormat) {
      if (length == 0 || length > kMaxBackingNameBytes) {
        return Bad(image,
                   absl::StrCat("backing format extension of ", length,
                                " bytes; allowed 1..", kMaxBackingNameBytes));
      }
      header.backing_format.assign(reinterpret_cast<const char*>(p), length);
    } else if (type == kExtFeatureNames) {
      if (length % 48 != 0) {
        return Bad(image, absl::StrCat("feature name table of ", length,
                                       " bytes is not a multiple of 48"));
      }
      header.feature_names.clear();
      for (uint32_t i = 0; i < length / 48; ++i) {
        const uint8_t* entry = p + 48 * i;
        FeatureName name;
        name.type = entry[0];
        name.bit = entry[1];
        const char* text = reinterpret_cast<const char*>(entry + 2);
        name.name.assign(text, strnlen(text, 46));
        header.feature_names.push_back(std::move(name));
      }
    }
    // Any other extension (bitmaps, encryption, external data file name,
    // unknown ones) is skipped: the features that need them are refused
    // or cleared elsewhere.
    at = data + padded;
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t L1EntriesFor(uint64_t size, uint32_t cluster_bits, bool extended_l2) {
  const uint32_t shift = cluster_bits + (cluster_bits - (extended_l2 ? 4 : 3));
  return (size >> shift) + ((size & ((uint64_t{1} << shift) - 1)) ? 1 : 0);
}

absl::StatusOr<Qcow2Header> ParseQcow2Header(std::span<const uint8_t> bytes,
                                             const std::string& image) {
  if (bytes.size() < kV2HeaderBytes) {
    return Bad(image, absl::StrCat("header needs ", kV2HeaderBytes,
                                   " bytes; the file has ", bytes.size()));
  }
  const uint8_t* p = bytes.data();
  const uint32_t magic = LoadBe32(p);
  if (magic != kQcow2Magic) {
    return absl::InvalidArgumentError(
        absl::StrCat(image, ": not a qcow2 image (magic 0x", absl::Hex(magic),
                     ", expected 0x", absl::Hex(kQcow2Magic), ")"));
  }
  Qcow2Header h;
  h.version = LoadBe32(p + 4);
  if (h.version != 2 && h.version != 3) {
    return Bad(image, absl::StrCat("version ", h.version,
                                   " is not supported; allowed 2 and 3"));
  }
  h.backing_file_offset = LoadBe64(p + 8);
  h.backing_file_size = LoadBe32(p + 16);
  h.cluster_bits = LoadBe32(p + 20);
  h.size = LoadBe64(p + 24);
  h.crypt_method = LoadBe32(p + 32);
  h.l1_size = LoadBe32(p + 36);
  h.l1_table_offset = LoadBe64(p + 40);
  h.refcount_table_offset = LoadBe64(p + 48);
  h.refcount_table_clusters = LoadBe32(p + 56);
  h.nb_snapshots = LoadBe32(p + 60);
  h.snapshots_offset = LoadBe64(p + 64);

  if (h.cluster_bits < kMinClusterBits || h.cluster_bits > kMaxClusterBits) {
    return Bad(image,
               absl::StrCat("cluster_bits ", h.cluster_bits,
                            " is out of range; allowed ", kMinClusterBits, "..",
                            kMaxClusterBits, " (512 B to 2 MiB clusters)"));
  }
  const uint64_t cluster = h.cluster_size();

  if (h.version == 2) {
    h.refcount_order = 4;
    h.header_length = kV2HeaderBytes;
  } else {
    if (bytes.size() < kV3HeaderBytes) {
      return Bad(image, absl::StrCat("version 3 header needs ", kV3HeaderBytes,
                                     " bytes; the file has ", bytes.size()));
    }
    h.incompatible_features = LoadBe64(p + 72);
    h.compatible_features = LoadBe64(p + 80);
    h.autoclear_features = LoadBe64(p + 88);
    h.refcount_order = LoadBe32(p + 96);
    h.header_length = LoadBe32(p + 100);
    if (h.header_length < kV3HeaderBytes || h.header_length % 8 != 0 ||
        h.header_length > cluster || h.header_length > bytes.size()) {
      return Bad(image, absl::StrCat(
                            "header_length ", h.header_length,
                            " is invalid; allowed a multiple of 8 from ",
                            kV3HeaderBytes, " to the cluster size ", cluster));
    }
    if (h.header_length > kV3HeaderBytes) h.compression_type = p[104];
    if (h.refcount_order > kMaxRefcountOrder) {
      return Bad(image, absl::StrCat("refcount_order ", h.refcount_order,
                                     " is not supported; allowed 0..",
                                     kMaxRefcountOrder,
                                     " (refcounts of 1 to 64 bits)"));
    }
  }

  if (absl::Status s = CheckIncompatibleFeatures(h.incompatible_features,
                                                 /*writable=*/false, image);
      !s.ok()) {
    return s;
  }
  const bool type_bit =
      (h.incompatible_features & kIncompatCompressionType) != 0;
  if (h.compression_type > 1) {
    return Bad(image,
               absl::StrCat("compression type ", int{h.compression_type},
                            " is unknown; allowed 0 (zlib) and 1 (zstd)"));
  }
  if (type_bit != (h.compression_type != 0)) {
    return Bad(image, absl::StrCat("compression type ", int{h.compression_type},
                                   type_bit ? " with" : " without",
                                   " incompatible bit 3 (compression type)"
                                   " set; the bit is set exactly when the"
                                   " type is not 0"));
  }
  if (h.crypt_method != 0) {
    return Bad(image, absl::StrCat("crypt_method ", h.crypt_method,
                                   ": encrypted images are not supported; "
                                   "allowed 0 (none)"));
  }
  if (h.size % 512 != 0) {
    return Bad(image, absl::StrCat("virtual size ", h.size,
                                   " is not a multiple of 512"));
  }
  if (h.l1_size > kMaxL1Entries) {
    return Bad(image, absl::StrCat("l1_size ", h.l1_size,
                                   " is too large; allowed at most ",
                                   kMaxL1Entries, " entries (32 MiB)"));
  }
  if (h.extended_l2() && h.cluster_bits < kMinExtendedL2ClusterBits) {
    return Bad(image, absl::StrCat("cluster_bits ", h.cluster_bits,
                                   " with extended L2 entries; allowed ",
                                   kMinExtendedL2ClusterBits, "..",
                                   kMaxClusterBits, " (16 KiB to 2 MiB)"));
  }
  const uint64_t l1_needed =
      L1EntriesFor(h.size, h.cluster_bits, h.extended_l2());
  if (h.l1_size < l1_needed) {
    return Bad(image,
               absl::StrCat("l1_size ", h.l1_size,
                            " maps less than"
                            " the virtual size ",
                            h.size, ", which needs ", l1_needed, " entries"));
  }
  if (h.l1_size > 0) {
    PVDISK_RETURN_IF_ERROR(
        CheckTableOffset(image, "l1_table_offset", h.l1_table_offset, cluster));
  }
  PVDISK_RETURN_IF_ERROR(CheckTableOffset(image, "refcount_table_offset",
                                          h.refcount_table_offset, cluster));
  if (h.refcount_table_clusters == 0 ||
      uint64_t{h.refcount_table_clusters} * cluster > kMaxRefcountTableBytes) {
    return Bad(image, absl::StrCat(
                          "refcount_table_clusters ", h.refcount_table_clusters,
                          " is out of range; allowed 1 to ",
                          kMaxRefcountTableBytes / cluster, " (8 MiB)"));
  }
  if (h.nb_snapshots > 0) {
    PVDISK_RETURN_IF_ERROR(CheckTableOffset(image, "snapshots_offset",
                                            h.snapshots_offset, cluster));
  }

  // Everything the header refers to lies in the first cluster.
  const uint64_t first = std::min<uint64_t>(cluster, bytes.size());
  uint64_t extensions_end = first;
  if (h.backing_file_offset != 0) {
    if (h.backing_file_size == 0 ||
        h.backing_file_size > kMaxBackingNameBytes) {
      return Bad(image, absl::StrCat("backing_file_size ", h.backing_file_size,
                                     " is out of range; allowed 1..",
                                     kMaxBackingNameBytes));
    }
    if (h.backing_file_offset < h.header_length ||
        h.backing_file_offset > first ||
        h.backing_file_size > first - h.backing_file_offset) {
      return Bad(image,
                 absl::StrCat("backing file name at byte ",
                              h.backing_file_offset, " (", h.backing_file_size,
                              " bytes) is not inside the first "
                              "cluster after the header"));
    }
    h.backing_file.assign(
        reinterpret_cast<const char*>(p + h.backing_file_offset),
        h.backing_file_size);
    if (h.backing_file.find('\0') != std::string::npos) {
      return Bad(image, "backing file name contains a NUL byte");
    }
    extensions_end = h.backing_file_offset;
  }
  if (absl::Status s =
          ParseExtensions(bytes, h.header_length, extensions_end, image, h);
      !s.ok()) {
    return s;
  }
  if (!h.backing_format.empty() && h.backing_file.empty()) {
    return Bad(image, "backing format extension without a backing file");
  }
  return h;
}

absl::StatusOr<std::vector<uint8_t>> EncodeQcow2Header(Qcow2Header h) {
  const uint64_t cluster = h.cluster_size();
  std::vector<uint8_t> out(cluster, 0);
  const uint32_t fixed = h.version == 2 ? kV2HeaderBytes : kV3HeaderBytes;
  h.header_length = fixed;
  uint64_t at = fixed;
  auto put_extension = [&](uint32_t type, const std::string& data) -> bool {
    const uint64_t padded = (data.size() + 7) & ~size_t{7};
    if (at + 8 + padded + 8 > cluster) return false;
    StoreBe32(out.data() + at, type);
    StoreBe32(out.data() + at + 4, static_cast<uint32_t>(data.size()));
    std::memcpy(out.data() + at + 8, data.data(), data.size());
    at += 8 + padded;
    return true;
  };
  if (!h.backing_format.empty() &&
      !put_extension(kExtBackingFormat, h.backing_format)) {
    return absl::InvalidArgumentError(
        "backing format does not fit the header cluster");
  }
  at += 8;  // the end marker: type 0, length 0
  h.backing_file_offset = 0;
  h.backing_file_size = 0;
  if (!h.backing_file.empty()) {
    if (h.backing_file.size() > kMaxBackingNameBytes ||
        at + h.backing_file.size() > cluster) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backing file name of ", h.backing_file.size(),
          " bytes does not fit; allowed up to ", kMaxBackingNameBytes,
          " bytes inside the header cluster"));
    }
    h.backing_file_offset = at;
    h.backing_file_size = static_cast<uint32_t>(h.backing_file.size());
    std::memcpy(out.data() + at, h.backing_file.data(), h.backing_file.size());
  }
  uint8_t* p = out.data();
  StoreBe32(p, kQcow2Magic);
  StoreBe32(p + 4, h.version);
  StoreBe64(p + 8, h.backing_file_offset);
  StoreBe32(p + 16, h.backing_file_size);
  StoreBe32(p + 20, h.cluster_bits);
  StoreBe64(p + 24, h.size);
  StoreBe32(p + 32, h.crypt_method);
  StoreBe32(p + 36, h.l1_size);
  StoreBe64(p + 40, h.l1_table_offset);
  StoreBe64(p + 48, h.refcount_table_offset);
  StoreBe32(p + 56, h.refcount_table_clusters);
  StoreBe32(p + 60, h.nb_snapshots);
  StoreBe64(p + 64, h.snapshots_offset);
  if (h.version == 3) {
    StoreBe64(p + 72, h.incompatible_features);
    StoreBe64(p + 80, h.compatible_features);
    StoreBe64(p + 88, h.autoclear_features);
    StoreBe32(p + 96, h.refcount_order);
    StoreBe32(p + 100, h.header_length);
  }
  return out;
}

}  // namespace pvdisk::image::qcow2
