// Compressed clusters: the L2 entry that names one, and inflating its
// bytes into a cluster.
//
// A compressed L2 entry (bit 62 set) holds, with x = 62 - (cluster_bits -
// 8): in bits 0..x-1 the host byte where the compressed data starts (not
// aligned to anything), and in bits x..61 how many 512-byte sectors the
// data occupies beyond the one holding that byte. The data may end inside
// its last sector, and several compressed clusters may share a host
// cluster. The data is a raw deflate stream (no zlib header, 4 KiB window)
// for compression type 0, a zstd frame for type 1; either inflates to
// exactly one cluster, and what follows in the last sector is ignored.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace pvdisk::image::qcow2 {

struct CompressedExtent {
  uint64_t offset = 0;  // host byte where the compressed data starts
  // Bytes from `offset` to the end of the descriptor's last sector: the
  // most the data occupies; the host clusters they touch each hold one
  // reference for the entry.
  uint64_t length = 0;
};

// Decodes a compressed L2 entry (kL2Compressed set) of an image whose
// clusters are 2^cluster_bits bytes.
CompressedExtent DecodeCompressedEntry(uint64_t raw, uint32_t cluster_bits);

// The host clusters (their offsets) the data of `extent` touches: each
// holds one reference for the entry, given back when the entry goes.
std::vector<uint64_t> CompressedHostClusters(const CompressedExtent& extent,
                                             uint64_t cluster_size);

// Inflates `in` (the compressed bytes, possibly with trailing bytes of the
// last sector) into `cluster`. DataLoss unless the stream is valid and
// yields at least cluster.size() bytes (what it yields beyond is ignored).
// `compression_type`: 0 deflate, 1 zstd (the header's field).
absl::Status InflateCluster(uint8_t compression_type,
                            std::span<const uint8_t> in,
                            std::span<uint8_t> cluster);

// Reads the compressed data of `extent` with `read` (host bytes; past the
// end of the file they read as zeros) into `scratch` and inflates it into
// `cluster`; the error names `name` and the extent.
absl::Status ReadCompressedCluster(
    const std::string& name, uint8_t compression_type,
    const CompressedExtent& extent,
    absl::FunctionRef<absl::Status(uint64_t, std::span<uint8_t>)> read,
    std::vector<uint8_t>& scratch, std::span<uint8_t> cluster);

}  // namespace pvdisk::image::qcow2
