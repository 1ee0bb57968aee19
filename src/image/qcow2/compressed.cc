#include "image/qcow2/compressed.h"

#include <zlib.h>
#include <zstd.h>

#include "absl/strings/str_cat.h"

namespace pvdisk::image::qcow2 {

CompressedExtent DecodeCompressedEntry(uint64_t raw, uint32_t cluster_bits) {
  const uint32_t shift = 62 - (cluster_bits - 8);
  const uint64_t sectors_mask = (uint64_t{1} << (cluster_bits - 8)) - 1;
  CompressedExtent e;
  e.offset = raw & ((uint64_t{1} << shift) - 1);
  const uint64_t sectors = ((raw >> shift) & sectors_mask) + 1;
  e.length = sectors * 512 - e.offset % 512;
  return e;
}

std::vector<uint64_t> CompressedHostClusters(const CompressedExtent& extent,
                                             uint64_t cluster_size) {
  std::vector<uint64_t> clusters;
  const uint64_t last = (extent.offset + extent.length - 1) / cluster_size;
  for (uint64_t c = extent.offset / cluster_size; c <= last; ++c) {
    clusters.push_back(c * cluster_size);
  }
  return clusters;
}

namespace {

// Raw deflate with the window QEMU compresses with (2^12 bytes); a larger
// window than the stream's is harmless, so inflate accepts up to 2^15.
absl::Status InflateDeflate(std::span<const uint8_t> in,
                            std::span<uint8_t> cluster) {
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) {
    return absl::ResourceExhaustedError("cannot set up inflate");
  }
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = cluster.data();
  z.avail_out = static_cast<uInt>(cluster.size());
  const int rc = inflate(&z, Z_FINISH);
  const uInt left = z.avail_out;
  inflateEnd(&z);
  // The stream ends with the cluster full (Z_STREAM_END), or the cluster
  // fills before the stream ends (Z_BUF_ERROR with no room left).
  if ((rc == Z_STREAM_END || rc == Z_BUF_ERROR || rc == Z_OK) && left == 0) {
    return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrCat("deflate data ",
                   rc == Z_STREAM_END || rc == Z_BUF_ERROR
                       ? "inflates to less than a cluster"
                       : "is invalid",
                   " (zlib ", rc, ", ", cluster.size() - left, " of ",
                   cluster.size(), " bytes)"));
}

absl::Status InflateZstd(std::span<const uint8_t> in,
                         std::span<uint8_t> cluster) {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  if (ctx == nullptr) {
    return absl::ResourceExhaustedError("cannot set up zstd");
  }
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  ZSTD_outBuffer dst{cluster.data(), cluster.size(), 0};
  size_t rc = 0;
  // Frames one after another until the cluster is full; the padding of
  // the last sector after the last frame is never looked at.
  while (dst.pos < dst.size && src.pos < src.size) {
    rc = ZSTD_decompressStream(ctx, &dst, &src);
    if (ZSTD_isError(rc)) break;
    if (rc != 0 && src.pos == src.size) break;  // input ran out mid-frame
  }
  ZSTD_freeDCtx(ctx);
  if (ZSTD_isError(rc)) {
    return absl::DataLossError(
        absl::StrCat("zstd data is invalid (", ZSTD_getErrorName(rc), ")"));
  }
  if (dst.pos < dst.size) {
    return absl::DataLossError(
        absl::StrCat("zstd data inflates to less than a cluster (", dst.pos,
                     " of ", dst.size, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InflateCluster(uint8_t compression_type,
                            std::span<const uint8_t> in,
                            std::span<uint8_t> cluster) {
  switch (compression_type) {
    case 0:
      return InflateDeflate(in, cluster);
    case 1:
      return InflateZstd(in, cluster);
    default:
      return absl::DataLossError(
          absl::StrCat("compression type ", int{compression_type},
                       " is unknown; allowed 0 (zlib) and 1 (zstd)"));
  }
}

absl::Status ReadCompressedCluster(
    const std::string& name, uint8_t compression_type,
    const CompressedExtent& extent,
    absl::FunctionRef<absl::Status(uint64_t, std::span<uint8_t>)> read,
    std::vector<uint8_t>& scratch, std::span<uint8_t> cluster) {
  scratch.resize(extent.length);
  if (absl::Status s = read(extent.offset, scratch); !s.ok()) return s;
  absl::Status s = InflateCluster(compression_type, scratch, cluster);
  if (s.ok()) return s;
  return absl::DataLossError(absl::StrCat(
      name, ": the compressed cluster at host byte ", extent.offset, " (",
      extent.length, " bytes): ", std::string(s.message())));
}

}  // namespace pvdisk::image::qcow2
