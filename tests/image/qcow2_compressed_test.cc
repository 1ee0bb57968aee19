// Compressed qcow2 clusters. Without files: the L2 descriptor's split of
// offset and sector count for small, default and large clusters, and
// inflating deflate and zstd data into a cluster, bad data refused.
// Through a real mount, with QEMU's tools as the judge: images `qemu-img
// convert -c` made (zlib and zstd; random, zero and repeated data) read
// as `qemu-img convert -O raw` reads them; fio's verified writes across
// compressed clusters, and a discard of some, leave an image `qemu-img
// check` passes (the old compressed clusters' references given back) and
// `qemu-img compare` finds equal to what the mount showed; a descriptor running
// past the file, or data that does not inflate to a cluster, fails that read
// with EIO only.
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "image/qcow2/compressed.h"
#include "qemu_judge.h"

namespace pvdisk::fuse_testing {
namespace {

using image::qcow2::CompressedExtent;
using image::qcow2::CompressedHostClusters;
using image::qcow2::DecodeCompressedEntry;
using image::qcow2::InflateCluster;

constexpr uint64_t kMiB = 1 << 20;

TEST(Qcow2CompressedEntryTest, OffsetAndSectorsSplitByClusterBits) {
  // 64 KiB clusters: offset in bits 0..53, extra sectors in 54..61.
  const uint64_t raw64k = (1ull << 62) | (3ull << 54) | 0x12345;
  CompressedExtent e = DecodeCompressedEntry(raw64k, 16);
  EXPECT_EQ(e.offset, 0x12345u);
  EXPECT_EQ(e.length, 4 * 512 - 0x145u);
  // 512 B clusters: offset in bits 0..60, one sector bit (61).
  e = DecodeCompressedEntry((1ull << 62) | (1ull << 61) | 0x800, 9);
  EXPECT_EQ(e.offset, 0x800u);
  EXPECT_EQ(e.length, 1024u);
  // 2 MiB clusters: offset in bits 0..48, extra sectors in 49..61.
  e = DecodeCompressedEntry((1ull << 62) | (0x1fffull << 49) | 0x200000, 21);
  EXPECT_EQ(e.offset, 0x200000u);
  EXPECT_EQ(e.length, 0x2000u * 512);
  // Data crossing a cluster boundary holds a reference in both clusters.
  EXPECT_EQ(CompressedHostClusters({65536 - 100, 612}, 65536),
            (std::vector<uint64_t>{0, 65536}));
  EXPECT_EQ(CompressedHostClusters({65536 + 512, 512}, 65536),
            (std::vector<uint64_t>{65536}));
}

std::vector<uint8_t> ClusterData(size_t size) {
  std::vector<uint8_t> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>(i * 7 / 5);
  return data;
}

// Raw deflate with QEMU's 4 KiB window.
std::vector<uint8_t> Deflate(const std::vector<uint8_t>& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -12, 9,
                         Z_DEFAULT_STRATEGY),
            Z_OK);
  std::vector<uint8_t> out(deflateBound(&z, in.size()));
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::vector<uint8_t> Zstd(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n =
      ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(Qcow2InflateTest, DeflateAndZstdFillTheClusterAndIgnoreSectorPadding) {
  const std::vector<uint8_t> data = ClusterData(65536);
  for (uint8_t type : {0, 1}) {
    std::vector<uint8_t> in = type == 0 ? Deflate(data) : Zstd(data);
    in.resize((in.size() + 511) / 512 * 512, 0xee);  // the last sector's rest
    std::vector<uint8_t> out(65536);
    ASSERT_TRUE(InflateCluster(type, in, out).ok()) << int{type};
    EXPECT_EQ(out, data) << int{type};
  }
}

TEST(Qcow2InflateTest, ShortTruncatedGarbageAndUnknownTypeAreRefused) {
  const std::vector<uint8_t> data = ClusterData(65536);
  std::vector<uint8_t> out(65536);
  for (uint8_t type : {0, 1}) {
    // Data for half a cluster.
    const std::vector<uint8_t> half(data.begin(), data.begin() + 32768);
    absl::Status s =
        InflateCluster(type, type == 0 ? Deflate(half) : Zstd(half), out);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("less than a cluster"), std::string::npos) << s;
    // A stream cut short.
    std::vector<uint8_t> cut = type == 0 ? Deflate(data) : Zstd(data);
    cut.resize(cut.size() / 2);
    EXPECT_EQ(InflateCluster(type, cut, out).code(),
              absl::StatusCode::kDataLoss);
    // Bytes that are no stream.
    const std::vector<uint8_t> junk(512, 0xff);
    EXPECT_EQ(InflateCluster(type, junk, out).code(),
              absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(InflateCluster(2, Deflate(data), out).code(),
            absl::StatusCode::kDataLoss);
  // Data for more than a cluster fills the cluster and no more.
  std::vector<uint8_t> two = ClusterData(2 * 65536);
  std::vector<uint8_t> guarded(65536 + 16, 0x5c);
  ASSERT_TRUE(
      InflateCluster(0, Deflate(two), std::span(guarded).first(65536)).ok());
  EXPECT_EQ(std::vector<uint8_t>(guarded.begin(), guarded.begin() + 65536),
            std::vector<uint8_t>(two.begin(), two.begin() + 65536));
  EXPECT_EQ(guarded.back(), 0x5c);
}

// 4 MiB of 64 KiB pieces: random (stored uncompressed: it does not
// shrink), zeros, a repeated string, and random, zero and repeated parts
// in one cluster.
void MakeSource(const TempDir& dir) {
  ShOk("cd '" + dir.path() +
       "' && : > src.raw && for i in $(seq 0 15); do "
       "head -c 65536 /dev/urandom >> src.raw; head -c 65536 /dev/zero >> "
       "src.raw; yes pvdisk-$i | head -c 65536 >> src.raw; "
       "head -c 20000 /dev/urandom >> src.raw; head -c 25536 /dev/zero >> "
       "src.raw; yes x | head -c 20000 >> src.raw; done");
}

// `name` made by `qemu-img convert -c` from src.raw with `options`.
void MakeCompressed(const TempDir& dir, const std::string& name,
                    const std::string& options) {
  ShOk("cd '" + dir.path() + "' && qemu-img convert -q -c -f raw -O qcow2 " +
       options + " src.raw " + name);
}

struct Kind {
  std::string name;
  std::string options;
};
const std::vector<Kind>& Kinds() {
  static const auto* kinds = new std::vector<Kind>{
      {"zlib.qcow2", ""},
      {"zstd.qcow2", "-o compression_type=zstd"},
      {"zlib4k.qcow2", "-o cluster_size=4k"},
      {"zstd2m.qcow2", "-o compression_type=zstd,cluster_size=2M"},
  };
  return *kinds;
}

TEST(Qcow2CompressedMountTest, ImagesReadAsQemuImgConvertShowsThem) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  MakeSource(dir);
  std::vector<std::string> args;
  for (const Kind& k : Kinds()) {
    MakeCompressed(dir, k.name, k.options);
    args.insert(args.end(), {"--disk", dir.Path(k.name) + ",ro"});
  }
  Mount mount(dir.MakeDir("mnt"), args);
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  for (const Kind& k : Kinds()) {
    const std::string expected = QemuRaw(dir, dir.Path(k.name));
    ASSERT_EQ(expected, ReadWholeFile(dir.Path("src.raw"))) << k.name;
    const std::string shown = ReadWholeFile(mount.Path(k.name));
    ASSERT_EQ(shown.size(), 4 * kMiB) << k.name;
    EXPECT_EQ(FirstDifference(expected, shown), "") << k.name;
    EXPECT_GT(StatsOf(mount.mountpoint(), k.name)["compressed_reads"], 0u)
        << k.name;
  }
}

TEST(Qcow2CompressedMountTest, FioVerifiedWritesAcrossCompressedClusters) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  MakeSource(dir);
  constexpr uint64_t kPunch = 3 * kMiB + 60 * 1024;
  constexpr uint64_t kPunchLength = 200 * 1024;
  std::string before = ReadWholeFile(dir.Path("src.raw"));
  for (const Kind& k : {Kinds()[0], Kinds()[1]}) {
    MakeCompressed(dir, k.name, k.options);
    const std::string image = dir.Path(k.name);
    const std::string shown = dir.Path("shown.raw");
    {
      Mount mount(dir.MakeDir("mnt-" + k.name), {"--disk", image});
      ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
      const std::string disk = mount.Path(k.name);
      // 4 KiB writes into [1 MiB, 3 MiB): each first write into a
      // compressed cluster copies the rest of it.
      ExpectFioClean(RunCommand(
          FioCommand(disk, {"--rw=randwrite", "--bs=4k", "--size=2m",
                            "--offset=1m", "--iodepth=8", "--number_ios=96",
                            "--verify=crc32c", "--do_verify=1"})));
      // A discard of [3 MiB + 60 KiB, 3 MiB + 260 KiB): whole compressed
      // clusters given back, parts of two more copied and zeroed.
      {
        Fd fd = Open(disk, O_RDWR);
        ASSERT_TRUE(fd.valid()) << std::strerror(errno);
        ASSERT_EQ(
            fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      kPunch, kPunchLength),
            0)
            << std::strerror(errno);
        ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
      }
      const DiskStats stats = StatsOf(mount.mountpoint(), k.name);
      EXPECT_GT(stats["cow_bytes"], 0u) << k.name;
      EXPECT_GT(stats["clusters_allocated"], 0u) << k.name;
      ShOk("cp '" + disk + "' '" + shown + "'");
    }
    ShOk("qemu-img check '" + image + "'");
    ShOk("qemu-img compare -f qcow2 -F raw '" + image + "' '" + shown + "'");
    // What fio did not write is what the image held before, or zeros
    // where the discard went.
    const std::string after = ReadWholeFile(shown);
    before.replace(kPunch, kPunchLength, kPunchLength, '\0');
    ASSERT_EQ(after.size(), before.size());
    EXPECT_EQ(FirstDifference(before.substr(0, kMiB), after.substr(0, kMiB)),
              "")
        << k.name;
    EXPECT_EQ(FirstDifference(before.substr(3 * kMiB), after.substr(3 * kMiB)),
              "")
        << k.name;
  }
}

TEST(Qcow2CompressedMountTest, HostileDescriptorsFailOnlyTheirCluster) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  MakeSource(dir);
  MakeCompressed(dir, "zlib.qcow2", "");
  std::string file = ReadWholeFile(dir.Path("zlib.qcow2"));
  // 64 KiB clusters, 4 MiB: one L2 table; sectors in bits 54..61.
  const uint64_t l2 = Be64(file, Be64(file, 40)) & 0x00fffffffffffe00ull;
  auto entry_at = [&](uint64_t cluster) { return l2 + 8 * cluster; };
  const uint64_t mask = (1ull << 54) - 1;
  // Cluster 3: the mixed one; its data spans several sectors.
  const uint64_t mixed = Be64(file, entry_at(3));
  ASSERT_NE(mixed & (1ull << 62), 0u);
  ASSERT_GT((mixed >> 54) & 0xff, 2u);
  // Its data cut to one sector: it does not inflate to a cluster.
  PutBe64(file, entry_at(3), mixed & ~(0xffull << 54));
  // The last compressed cluster's sectors run past the end of the file.
  uint64_t last = 0;
  uint64_t last_offset = 0;
  for (uint64_t c = 0; c < 64; ++c) {
    const uint64_t e = Be64(file, entry_at(c));
    if ((e & (1ull << 62)) && (e & mask) > last_offset) {
      last = c;
      last_offset = e & mask;
    }
  }
  ASSERT_GT(last_offset + 256 * 512, (file.size() + 511) / 512 * 512);
  PutBe64(file, entry_at(last), (1ull << 62) | (0xffull << 54) | last_offset);
  WriteWholeFile(dir.Path("bad.qcow2"), file);
  const std::string good = ReadWholeFile(dir.Path("src.raw"));

  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("bad.qcow2") + ",ro"});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  const std::string disk = mount.Path("bad.qcow2");
  EXPECT_EQ(DirectReadErrno(disk, 3 * 65536, 4096), EIO);
  EXPECT_EQ(DirectReadErrno(disk, last * 65536 + 8192, 4096), EIO);
  // Every other cluster reads as before.
  Fd fd = Open(disk, O_RDONLY);
  ASSERT_TRUE(fd.valid());
  for (uint64_t c = 0; c < 64; ++c) {
    if (c == 3 || c == last) continue;
    EXPECT_EQ(DirectReadErrno(disk, c * 65536, 65536), 0) << c;
  }
  EXPECT_EQ(FirstDifference(good.substr(2 * 65536, 65536),
                            PreadAll(fd.get(), 2 * 65536, 65536)),
            "");
  EXPECT_TRUE(IsMounted(mount.mountpoint()));
}

}  // namespace
}  // namespace pvdisk::fuse_testing
