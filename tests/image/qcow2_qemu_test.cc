// The qcow2 core against QEMU's own tools as the judge: images made and
// filled by qemu-img and qemu-io read the same through pvdisk's mapping
// (falling to the backing chain or zeros) as through `qemu-img convert -O
// raw`; clusters pvdisk allocates pass `qemu-img check` and qemu-io reads
// the patterns back; images pvdisk creates pass the check; hostile images
// are refused, or the range they spoil is an error, never a crash.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/temp_dir.h"
#include "gtest/gtest.h"
#include "image/qcow2/chain.h"
#include "image/qcow2/create.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/entries.h"
#include "image/qcow2/info.h"

namespace pvdisk::image::qcow2 {
namespace {

using pvdisk::testing::TempDir;

// Runs a shell command; returns its exit status and puts its output
// (stdout and stderr) in `out`.
int Sh(const std::string& command, std::string* out = nullptr) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  int status = pclose(p);
  if (out != nullptr) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void ShOk(const std::string& command) {
  std::string out;
  ASSERT_EQ(Sh(command, &out), 0) << command << "\n" << out;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// The disk as QEMU reads it.
std::vector<uint8_t> QemuRaw(const TempDir& dir, const std::string& image) {
  const std::string raw = dir.File("judge.raw");
  ShOk("qemu-img convert -O raw '" + image + "' '" + raw + "'");
  std::vector<uint8_t> bytes = ReadFile(raw);
  unlink(raw.c_str());
  return bytes;
}

// The disk as pvdisk's mapping reads it, in pieces that cross clusters.
std::vector<uint8_t> Mine(const std::string& image) {
  absl::StatusOr<std::unique_ptr<ImageChain>> chain = ImageChain::Open(image);
  EXPECT_TRUE(chain.ok()) << chain.status();
  if (!chain.ok()) return {};
  std::vector<uint8_t> out((*chain)->size());
  const size_t piece = 384 * 1024 + 512;
  for (size_t at = 0; at < out.size(); at += piece) {
    std::span<uint8_t> s(out.data() + at, std::min(piece, out.size() - at));
    absl::Status st = (*chain)->Read(at, s);
    EXPECT_TRUE(st.ok()) << st;
  }
  return out;
}

void ExpectSameAsQemu(const TempDir& dir, const std::string& image) {
  std::vector<uint8_t> mine = Mine(image);
  std::vector<uint8_t> judge = QemuRaw(dir, image);
  ASSERT_EQ(mine.size(), judge.size()) << image;
  for (size_t i = 0; i < mine.size(); ++i) {
    ASSERT_EQ(mine[i], judge[i]) << image << ": first difference at byte " << i;
  }
}

// Runs qemu-io commands on `image` in one process; it exits non-zero if
// any of them fails (a read -P that finds another pattern, too).
void QemuIo(const std::string& image,
            const std::vector<std::string>& commands) {
  std::string line = "qemu-io";
  for (const std::string& c : commands) line += " -c '" + c + "'";
  ShOk(line + " '" + image + "'");
}

// Patches 8 (or 4) big-endian bytes of a file.
void Patch(const std::string& path, uint64_t offset, uint64_t value,
           int width = 8) {
  int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  uint8_t b[8];
  if (width == 8) StoreBe64(b, value);
  if (width == 4) StoreBe32(b, static_cast<uint32_t>(value));
  ASSERT_EQ(pwrite(fd, b, width, static_cast<off_t>(offset)), width);
  close(fd);
}

uint64_t Field(const std::string& path, uint64_t offset) {
  std::vector<uint8_t> b = ReadFile(path);
  return LoadBe64(b.data() + offset);
}

struct Variant {
  std::string compat;  // 0.10 (v2) or 1.1 (v3)
  std::string cluster;
  std::string fill;  // empty, filled, prealloc
};

std::string Name(const ::testing::TestParamInfo<Variant>& info) {
  std::string c = info.param.compat == "0.10" ? "v2" : "v3";
  return c + "_" + info.param.cluster + "_" + info.param.fill;
}

class Qcow2QemuReadTest : public ::testing::TestWithParam<Variant> {};

TEST_P(Qcow2QemuReadTest, EveryByteMatchesQemuImgConvert) {
  TempDir dir("pvdisk_qcow2");
  const Variant& v = GetParam();
  const std::string img = dir.File("img.qcow2");
  std::string opts = "compat=" + v.compat + ",cluster_size=" + v.cluster;
  if (v.fill == "prealloc") opts += ",preallocation=metadata";
  ShOk("qemu-img create -q -f qcow2 -o " + opts + " '" + img + "' 6M");
  if (v.fill != "empty") {
    // Data, a run across clusters (at 1 MiB + 512), a long run, zero
    // clusters (v3; written zeros in v2) and the last 4 KiB.
    QemuIo(img, {"write -P 0xab 0 4k", "write -P 0xcd 1049088 70k",
                 "write -P 0x5a 2M 3M", "write -z 3M 128k",
                 "write -P 0x11 6140k 4k"});
  }
  ExpectSameAsQemu(dir, img);
}

INSTANTIATE_TEST_SUITE_P(
    Images, Qcow2QemuReadTest,
    ::testing::Values(
        Variant{"0.10", "4k", "empty"}, Variant{"0.10", "4k", "filled"},
        Variant{"0.10", "64k", "filled"}, Variant{"0.10", "2M", "filled"},
        Variant{"0.10", "64k", "prealloc"}, Variant{"1.1", "4k", "empty"},
        Variant{"1.1", "4k", "filled"}, Variant{"1.1", "64k", "empty"},
        Variant{"1.1", "64k", "filled"}, Variant{"1.1", "2M", "filled"},
        Variant{"1.1", "4k", "prealloc"}, Variant{"1.1", "2M", "prealloc"}),
    Name);

TEST(Qcow2QemuChainTest, TwoAndThreeLevelChainsMatchQemu) {
  TempDir dir("pvdisk_qcow2");
  const std::string base = dir.File("base.raw");
  const std::string mid = dir.File("mid.qcow2");
  const std::string top = dir.File("top.qcow2");
  ShOk("qemu-img create -q -f raw '" + base + "' 4M");
  QemuIo(base, {"write -P 0x01 0 4M"});
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=4k -b base.raw -F raw '" +
       mid + "'");
  QemuIo(mid, {"write -P 0x02 1M 1M", "write -z 3M 4k"});
  ExpectSameAsQemu(dir, mid);  // two levels
  // The top is larger than its backing: past 4 MiB it reads zeros.
  ShOk(
      "qemu-img create -q -f qcow2 -o cluster_size=64k -b mid.qcow2 -F qcow2 "
      "'" +
      top + "' 6M");
  QemuIo(top, {"write -P 0x03 1536k 1M", "write -P 0x04 5M 512"});
  ExpectSameAsQemu(dir, top);  // three levels
  absl::StatusOr<std::vector<LayerInfo>> info = DescribeImage(top);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->size(), 3u);
  EXPECT_EQ((*info)[1].format, "qcow2");
  EXPECT_EQ((*info)[2].format, "raw");
  EXPECT_EQ((*info)[0].backing_file, "mid.qcow2");
}

// A test-level writer on the core: writes `data` at `voff` of the top layer,
// allocating clusters in the crash-safe order update.h describes.
absl::Status WriteThrough(ImageChain& chain, uint64_t voff,
                          const std::vector<uint8_t>& data) {
  Qcow2File& file = *chain.layers().front().qcow2;
  const uint64_t cluster = file.header().cluster_size();
  size_t done = 0;
  while (done < data.size()) {
    const uint64_t at = voff + done;
    absl::StatusOr<Mapping> m = file.Map(at);
    if (!m.ok()) return m.status();
    const size_t n = std::min<uint64_t>(data.size() - done, m->bytes);
    std::span<const uint8_t> piece(data.data() + done, n);
    if (m->kind == L2Kind::kData && m->writable_in_place) {
      if (absl::Status s = file.WriteHost(m->host_offset, piece); !s.ok()) {
        return s;
      }
      done += n;
      continue;
    }
    // The whole new cluster: what the disk reads there now, then the write.
    const uint64_t start = at - at % cluster;
    std::vector<uint8_t> contents(
        std::min(cluster, file.header().size - start));
    if (absl::Status s = chain.Read(start, contents); !s.ok()) return s;
    std::copy(piece.begin(), piece.end(), contents.begin() + (at - start));
    WritePlan plan;
    if (absl::Status s = file.EnsureL2Table(at, plan); !s.ok()) return s;
    absl::StatusOr<uint64_t> host = file.AllocateCluster(plan);
    if (!host.ok()) return host.status();
    if (absl::Status s = file.Apply(plan); !s.ok()) return s;
    if (absl::Status s = file.WriteHost(*host, contents); !s.ok()) return s;
    plan.clear();
    if (absl::Status s = file.SetL2Entry(at, EncodeL2Data(*host), plan);
        !s.ok()) {
      return s;
    }
    if (m->host_cluster != 0) {  // the old cluster (shared, or preallocated)
      if (absl::Status s = file.Release(m->host_cluster, plan); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = file.Apply(plan); !s.ok()) return s;
    done += n;
  }
  return file.Flush();
}

struct WriteCase {
  std::string opts;
  std::string name;
};

class Qcow2QemuWriteTest : public ::testing::TestWithParam<WriteCase> {};

TEST_P(Qcow2QemuWriteTest, AllocatedClustersPassQemuImgCheck) {
  TempDir dir("pvdisk_qcow2");
  const std::string base = dir.File("base.qcow2");
  const std::string img = dir.File("img.qcow2");
  ShOk("qemu-img create -q -f qcow2 '" + base + "' 2M");
  QemuIo(base, {"write -P 0x77 0 2M"});
  ShOk("qemu-img create -q -f qcow2 -o " + GetParam().opts +
       " -b base.qcow2 -F qcow2 '" + img + "' 3M");
  QemuIo(img, {"write -P 0x66 1M 8k"});
  {
    absl::StatusOr<std::unique_ptr<ImageChain>> chain = ImageChain::Open(
        img, ChainOptions{.writable_top = true, .l2_cache_tables = 2});
    ASSERT_TRUE(chain.ok()) << chain.status();
    // Partial clusters over the backing file, over qemu's data, past the
    // backing file, and a long run that needs new L2 tables and refcount
    // blocks with small clusters.
    ASSERT_TRUE(
        WriteThrough(**chain, 1000, std::vector<uint8_t>(3000, 0xab)).ok());
    ASSERT_TRUE(
        WriteThrough(**chain, (1 << 20) + 100, std::vector<uint8_t>(200, 0xcd))
            .ok());
    ASSERT_TRUE(WriteThrough(**chain, 2560 * 1024,
                             std::vector<uint8_t>(512 * 1024, 0xef))
                    .ok());
    ASSERT_TRUE(
        WriteThrough(**chain, 1000 + 3000, std::vector<uint8_t>(96, 0x12))
            .ok());
    EXPECT_GT(chain->get()->layers().front().qcow2->metadata().l2_cache.hits(),
              0u);
  }
  std::string out;
  EXPECT_EQ(Sh("qemu-img check '" + img + "'", &out), 0) << out;
  QemuIo(img, {"read -P 0x77 0 1000", "read -P 0xab 1000 3000",
               "read -P 0x12 4000 96", "read -P 0x77 4096 4096",
               "read -P 0x66 1M 100", "read -P 0xcd 1048676 200",
               "read -P 0x66 1048876 7892", "read -P 0 2M 512k",
               "read -P 0xef 2560k 512k"});
  ExpectSameAsQemu(dir, img);
}

INSTANTIATE_TEST_SUITE_P(
    Images, Qcow2QemuWriteTest,
    ::testing::Values(
        WriteCase{"cluster_size=512", "v3_512"},
        WriteCase{"cluster_size=4k,compat=0.10", "v2_4k"},
        WriteCase{"cluster_size=64k,refcount_bits=1", "refcount1"},
        WriteCase{"cluster_size=4k,refcount_bits=64", "refcount64"},
        WriteCase{"cluster_size=2M", "v3_2M"}),
    [](const ::testing::TestParamInfo<WriteCase>& i) { return i.param.name; });

TEST(Qcow2QemuCreateTest, ImagesPvdiskCreatesPassQemuImgCheck) {
  TempDir dir("pvdisk_qcow2");
  for (uint64_t cluster : {512ull, 4096ull, 65536ull, 2ull << 20}) {
    const std::string img = dir.File(absl::StrCat("c", cluster, ".qcow2"));
    CreateOptions o;
    o.size = 64 << 20;
    o.cluster_size = cluster;
    ASSERT_TRUE(CreateQcow2(img, o).ok());
    std::string out;
    EXPECT_EQ(Sh("qemu-img check '" + img + "'", &out), 0) << out;
    QemuIo(img, {"write -P 0x42 1M 64k", "read -P 0x42 1M 64k"});
    EXPECT_EQ(Sh("qemu-img check '" + img + "'", &out), 0) << out;
    ExpectSameAsQemu(dir, img);
  }
  // Over a backing file: its size and format come from it.
  const std::string top = dir.File("top.qcow2");
  CreateOptions o;
  o.backing = "c4096.qcow2";
  ASSERT_TRUE(CreateQcow2(top, o).ok());
  std::string out;
  EXPECT_EQ(Sh("qemu-img check '" + top + "'", &out), 0) << out;
  QemuIo(top, {"read -P 0x42 1M 64k"});
  ExpectSameAsQemu(dir, top);
  // An image that would be its own backing file is refused and kept.
  CreateOptions self;
  self.backing = "top.qcow2";
  self.force = true;
  absl::Status own = CreateQcow2(top, self);
  EXPECT_TRUE(absl::IsInvalidArgument(own)) << own;
  EXPECT_EQ(Sh("qemu-img check '" + top + "'", &out), 0) << out;
  // Refusals leave nothing behind.
  o.backing = "missing.qcow2";
  absl::Status missing = CreateQcow2(dir.File("x.qcow2"), o);
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  o.backing = "";
  o.size = 1 << 20;
  o.cluster_size = 3000;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateQcow2(dir.File("x.qcow2"), o)));
  EXPECT_NE(access(dir.File("x.qcow2").c_str(), F_OK), 0);
}

// Hostile images, built by patching qemu's: refused with one line, or the
// spoiled range is an error while the rest reads.
class Qcow2HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 512-byte clusters: one L2 table maps 32 KiB, so the L1 table has 32
    // entries for 1 MiB.
    ShOk("qemu-img create -q -f qcow2 -o cluster_size=512 '" + img_ + "' 1M");
    QemuIo(img_, {"write -P 0xab 0 1k", "write -P 0xcd 64k 1k"});
    l1_ = Field(img_, 40);
    reftable_ = Field(img_, 48);
  }
  std::string Opens() {
    absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(img_);
    return c.ok() ? "" : std::string(c.status().message());
  }
  // Reads cluster `index` through the mapping: "" or the error.
  std::string ReadCluster(uint64_t index) {
    absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(img_);
    if (!c.ok()) return std::string(c.status().message());
    std::vector<uint8_t> b(512);
    absl::Status s = (*c)->Read(index * 512, b);
    return s.ok() ? "" : std::string(s.message());
  }
  uint64_t L2Of(uint64_t l1_index) {
    return Field(img_, l1_ + 8 * l1_index) & kOffsetMask;
  }
  TempDir dir_{"pvdisk_qcow2"};
  std::string img_ = dir_.File("h.qcow2");
  uint64_t l1_ = 0, reftable_ = 0;
};

TEST_F(Qcow2HostileTest, HeaderFieldsOutOfRangeAreRefused) {
  Patch(img_, 96, 7, 4);
  EXPECT_NE(Opens().find("refcount_order 7 is not supported"),
            std::string::npos);
  Patch(img_, 96, 4, 4);
  Patch(img_, 20, 8, 4);
  EXPECT_NE(Opens().find("cluster_bits 8 is out of range; allowed 9..21"),
            std::string::npos);
  Patch(img_, 20, 31, 4);
  EXPECT_NE(Opens().find("cluster_bits 31"), std::string::npos);
  Patch(img_, 20, 9, 4);
  Patch(img_, 36, 1u << 31, 4);
  EXPECT_NE(Opens().find("l1_size 2147483648 is too large"), std::string::npos);
  Patch(img_, 36, 32, 4);
  Patch(img_, 40, 1ull << 40);
  EXPECT_NE(Opens().find("runs past the end of the file"), std::string::npos);
  Patch(img_, 40, reftable_);
  EXPECT_NE(Opens().find("overlaps"), std::string::npos);
  Patch(img_, 40, l1_);
  Patch(img_, 72, 2);
  EXPECT_NE(Opens().find("bit 1 (corrupt)"), std::string::npos);
  Patch(img_, 72, 1ull << 2);
  EXPECT_NE(Opens().find("bit 2 (external data file)"), std::string::npos);
  Patch(img_, 72, 0);
  EXPECT_EQ(Opens(), "");
}

// Autoclear bits: cleared in the file when it is opened for writing.
TEST_F(Qcow2HostileTest, AutoclearBitsAreCleared) {
  Patch(img_, 88, 1);  // bitmaps
  absl::StatusOr<std::unique_ptr<ImageChain>> w =
      ImageChain::Open(img_, ChainOptions{.writable_top = true});
  ASSERT_TRUE(w.ok()) << w.status();
  w->reset();
  EXPECT_EQ(Field(img_, 88), 0u);
  std::string out;
  EXPECT_EQ(Sh("qemu-img check '" + img_ + "'", &out), 0) << out;
}

TEST_F(Qcow2HostileTest, BadL1EntriesSpoilOnlyTheirRange) {
  EXPECT_EQ(ReadCluster(0), "");
  const uint64_t good = Field(img_, l1_);
  const std::pair<uint64_t, const char*> cases[] = {
      {(1ull << 40) | kCopied, "past the end"},
      // With 512-byte clusters a misaligned offset sets reserved bit 8.
      {(good + 256) | kCopied, "reserved bits"},
      {reftable_ | kCopied, "overlaps other metadata"},
      {l1_ | kCopied, "overlaps other metadata"},
      {good | 0x100, "reserved bits"},
  };
  for (const auto& [entry, why] : cases) {
    Patch(img_, l1_, entry);
    std::string err = ReadCluster(0);
    EXPECT_NE(err.find(why), std::string::npos) << why << ": " << err;
    EXPECT_EQ(ReadCluster(64 * 2), "");  // 64 KiB: another L2 table
  }
}

// Entries that name the header cluster (offset 0: by the spec that is no
// cluster, so the range reads as unallocated, never as the header's bytes),
// or that are unaligned with clusters larger than the reserved bits can
// tell (4 KiB: bits 9..11 are offset bits), spoil their range only.
TEST_F(Qcow2HostileTest, EntriesIntoTheHeaderOrUnalignedSpoilTheirRange) {
  const std::string big = dir_.File("big.qcow2");
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=4k '" + big + "' 4M");
  QemuIo(big, {"write -P 0xab 0 8k", "write -P 0xcd 2M 4k"});
  const uint64_t l1 = Field(big, 40);
  const uint64_t l2 = Field(big, l1) & kOffsetMask;
  const uint64_t data = Field(big, l2) & kOffsetMask;
  std::vector<uint8_t> got(4096);
  auto read = [&](uint64_t voff) {
    absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(big);
    if (!c.ok()) return std::string(c.status().message());
    absl::Status s = (*c)->Read(voff, got);
    EXPECT_TRUE(s.ok() || absl::IsDataLoss(s)) << s;
    return s.ok() ? std::string() : std::string(s.message());
  };
  const std::vector<uint8_t> zeros(4096, 0);
  Patch(big, l2, EncodeL2Data(0));  // the header cluster
  EXPECT_EQ(read(0), "");
  EXPECT_TRUE(got == zeros) << "the header's bytes read as data";
  EXPECT_EQ(read(4096), "");
  Patch(big, l2, EncodeL2Data(data + 1024));
  EXPECT_NE(read(0).find("aligned"), std::string::npos) << read(0);
  EXPECT_EQ(read(4096), "");
  Patch(big, l2, EncodeL2Data(data));
  EXPECT_EQ(read(0), "");
  const uint64_t l1_entry = Field(big, l1);
  Patch(big, l1, kCopied);  // L1 entry 0 names cluster 0, the header
  EXPECT_EQ(read(0), "");
  EXPECT_TRUE(got == zeros) << "the header read as an L2 table";
  EXPECT_EQ(read(2 << 20), "");  // 2 MiB: another L1 entry
  Patch(big, l1, (l1_entry + 2048) | kCopied);
  EXPECT_NE(read(0).find("L1 entry 0"), std::string::npos) << read(0);
  EXPECT_EQ(read(2 << 20), "");
  // Each refusal is one line: what `pvdisk info` prints.
  EXPECT_EQ(read(0).find('\n'), std::string::npos);
}

TEST_F(Qcow2HostileTest, BadL2EntriesSpoilOnlyTheirCluster) {
  const uint64_t l2 = L2Of(0);
  const std::pair<uint64_t, const char*> cases[] = {
      {EncodeL2Data(1ull << 40), "past the end"},
      {EncodeL2Data(reftable_) + 512 * 0, "inside the refcount table"},
      {EncodeL2Data(l1_), "inside the L1 table"},
      {EncodeL2Data(512 * 0 + 0) | 0x200 * 0 | 0x4, "reserved bits"},
      {EncodeL2Data(l2), "inside an L2 table"},
  };
  for (const auto& [entry, why] : cases) {
    Patch(img_, l2, entry);
    std::string err = ReadCluster(0);
    EXPECT_NE(err.find(why), std::string::npos) << err;
    EXPECT_EQ(ReadCluster(1), "");  // the next cluster still reads
  }
}

TEST_F(Qcow2HostileTest, BackingLoopsAreRefused) {
  const std::string a = dir_.File("a.qcow2");
  const std::string b = dir_.File("b.qcow2");
  ShOk("qemu-img create -q -f qcow2 -u -b b.qcow2 -F qcow2 '" + a + "' 1M");
  ShOk("qemu-img create -q -f qcow2 -u -b a.qcow2 -F qcow2 '" + b + "' 1M");
  absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(a);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("loops"), std::string::npos)
      << c.status();
  const std::string self = dir_.File("self.qcow2");
  ShOk("qemu-img create -q -f qcow2 -u -b self.qcow2 -F qcow2 '" + self +
       "' 1M");
  EXPECT_FALSE(ImageChain::Open(self).ok());
}

// A backing name that names a FIFO is refused before it is opened: an open
// would block until a writer comes.
TEST_F(Qcow2HostileTest, ABackingFifoIsRefusedWithoutWaiting) {
  const std::string fifo = dir_.File("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string top = dir_.File("over-fifo.qcow2");
  ShOk("qemu-img create -q -f qcow2 -u -b pipe -F raw '" + top + "' 1M");
  absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(top);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not a regular file"), std::string::npos)
      << c.status();
}

TEST_F(Qcow2HostileTest, CompressedClustersReadUnlessTheirDataIsBad) {
  const std::string raw = dir_.File("r.raw");
  const std::string packed = dir_.File("c.qcow2");
  ShOk("qemu-img create -q -f raw '" + raw + "' 1M");
  QemuIo(raw, {"write -P 0x31 0 64k"});
  ShOk("qemu-img convert -c -O qcow2 '" + raw + "' '" + packed + "'");
  uint64_t data = 0;
  {
    absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(packed);
    ASSERT_TRUE(c.ok()) << c.status();
    std::vector<uint8_t> b(4096);
    ASSERT_TRUE((*c)->Read(4096, b).ok());
    EXPECT_EQ(b, std::vector<uint8_t>(4096, 0x31));
    absl::StatusOr<Mapping> m = (*c)->layers()[0].qcow2->Map(0);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->kind, L2Kind::kCompressed);
    data = m->host_offset;
  }
  // The compressed bytes overwritten: that range is an error, the rest
  // reads.
  {
    const int fd = open(packed.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const std::vector<uint8_t> junk(64, 0xff);
    ASSERT_EQ(pwrite(fd, junk.data(), junk.size(), static_cast<off_t>(data)),
              64);
    close(fd);
  }
  absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(packed);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<uint8_t> b(4096);
  absl::Status s = (*c)->Read(0, b);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("compressed"), std::string::npos) << s;
  EXPECT_TRUE((*c)->Read(512 * 1024, b).ok());
}

// A backing file the top image's owner could not read is refused, naming
// both files: the daemon runs as root, and a header names any file.
TEST(Qcow2OwnerTest, BackingFilesMustBeReadableByTheImagesOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files away";
  TempDir dir("pvdisk_qcow2");
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  const uid_t kNobody = 65534;
  const std::string secret = dir.File("secret.raw");
  const std::string top = dir.File("top.qcow2");
  ShOk("qemu-img create -q -f raw '" + secret + "' 1M");
  QemuIo(secret, {"write -P 0x5e 0 1M"});
  // Named by its absolute path, as a crafted header would.
  ShOk("qemu-img create -q -f qcow2 -b '" + secret + "' -F raw '" + top + "'");
  ASSERT_EQ(chown(top.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  for (bool writable : {false, true}) {
    absl::StatusOr<std::unique_ptr<ImageChain>> c =
        ImageChain::Open(top, ChainOptions{.writable_top = writable});
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(absl::IsPermissionDenied(c.status())) << c.status();
    EXPECT_NE(c.status().message().find(secret), std::string::npos);
    EXPECT_NE(c.status().message().find(top), std::string::npos);
    EXPECT_NE(c.status().message().find("uid 65534"), std::string::npos);
  }
  absl::StatusOr<std::vector<LayerInfo>> info = DescribeImage(top);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find(secret), std::string::npos);
  // Readable by others, the chain opens; a directory above it that the
  // owner cannot search refuses it again.
  ASSERT_EQ(chmod(secret.c_str(), 0644), 0);
  ExpectSameAsQemu(dir, top);
  const std::string locked = dir.File("locked");
  ASSERT_EQ(mkdir(locked.c_str(), 0700), 0);
  const std::string hidden = locked + "/hidden.raw";
  ASSERT_EQ(rename(secret.c_str(), hidden.c_str()), 0);
  const std::string top2 = dir.File("top2.qcow2");
  ShOk("qemu-img create -q -f qcow2 -u -b '" + hidden + "' -F raw '" + top2 +
       "' 1M");
  ASSERT_EQ(chown(top2.c_str(), kNobody, kNobody), 0);
  absl::StatusOr<std::unique_ptr<ImageChain>> c = ImageChain::Open(top2);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("is not searchable"), std::string::npos)
      << c.status();
  // The owner's group reads it: so does the owner.
  ASSERT_EQ(chmod(locked.c_str(), 0750), 0);
  ASSERT_EQ(chown(locked.c_str(), 0, kNobody), 0);
  ASSERT_EQ(chmod(hidden.c_str(), 0640), 0);
  ASSERT_EQ(chown(hidden.c_str(), 0, kNobody), 0);
  c = ImageChain::Open(top2);
  EXPECT_TRUE(c.ok()) << c.status();
  // An image root owns reads what root reads.
  ASSERT_EQ(chmod(hidden.c_str(), 0600), 0);
  ASSERT_EQ(chown(top2.c_str(), 0, 0), 0);
  c = ImageChain::Open(top2);
  EXPECT_TRUE(c.ok()) << c.status();
}

struct DirtyCase {
  std::string cluster;
  std::string name;
};

class Qcow2DirtyTest : public ::testing::TestWithParam<DirtyCase> {};

// An image qemu-io left dirty (lazy refcounts, then abort: the refcounts
// on disk are stale) reads as it is when opened read-only, and has its
// refcounts rebuilt when opened for writing: qemu-img check then finds
// nothing wrong, the dirty bit is clear, and the data is what it was.
TEST_P(Qcow2DirtyTest, RefcountsAreRebuiltBeforeAWritableOpen) {
  TempDir dir("pvdisk_qcow2");
  const std::string img = dir.File("dirty.qcow2");
  ShOk("qemu-img create -q -f qcow2 -o lazy_refcounts=on,cluster_size=" +
       GetParam().cluster + " '" + img + "' 4M");
  // qemu-io aborts: exits non-zero by design.
  std::string out;
  Sh("qemu-io -c 'write -P 0x5a 0 300k' -c 'write -P 0x6b 3M 64k' "
     "-c 'write -z 1M 64k' -c abort '" +
         img + "'",
     &out);
  ASSERT_EQ(Field(img, 72) & 1, 1u) << "qemu-io left no dirty image: " << out;
  // The refcount table loses its first block (as if it had never been
  // written): the rebuild must place a new one.
  Patch(img, Field(img, 48), 0);
  const std::vector<uint8_t> judge = QemuRaw(dir, img);
  EXPECT_EQ(Mine(img), judge);  // read-only: no rebuild
  ASSERT_EQ(Field(img, 72) & 1, 1u);
  {
    ::testing::internal::CaptureStderr();
    absl::StatusOr<std::unique_ptr<ImageChain>> w =
        ImageChain::Open(img, ChainOptions{.writable_top = true});
    const std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_NE(said.find(img + ": dirty bit set, refcounts rebuilt ("),
              std::string::npos)
        << said;
    EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
    // Allocating through the rebuilt refcounts keeps the image consistent.
    ASSERT_TRUE(
        WriteThrough(**w, 2 << 20, std::vector<uint8_t>(8192, 0x7c)).ok());
  }
  EXPECT_EQ(Field(img, 72) & 1, 0u);
  EXPECT_EQ(Sh("qemu-img check '" + img + "'", &out), 0) << out;
  QemuIo(img, {"read -P 0x5a 0 300k", "read -P 0 1M 64k", "read -P 0x7c 2M 8k",
               "read -P 0x6b 3M 64k"});
  std::vector<uint8_t> now = QemuRaw(dir, img);
  ASSERT_EQ(now.size(), judge.size());
  std::fill(now.begin() + (2 << 20), now.begin() + (2 << 20) + 8192, 0);
  EXPECT_TRUE(now == judge) << "the rebuild changed the data";
}

INSTANTIATE_TEST_SUITE_P(Images, Qcow2DirtyTest,
                         // 512-byte clusters: a refcount block covers 128 KiB
                         // of file, so the rebuild places blocks of its own.
                         ::testing::Values(DirtyCase{"512", "c512"},
                                           DirtyCase{"64k", "c64k"}),
                         [](const ::testing::TestParamInfo<DirtyCase>& i) {
                           return i.param.name;
                         });

// What makes a rebuild impossible leaves the image as it was, dirty.
TEST_F(Qcow2HostileTest, ADirtyImageWithBadEntriesIsNotRebuilt) {
  Patch(img_, 72, 1);  // dirty
  const uint64_t l2 = L2Of(0);
  Patch(img_, l2, EncodeL2Data(l1_));
  const std::vector<uint8_t> before = ReadFile(img_);
  absl::StatusOr<std::unique_ptr<ImageChain>> w =
      ImageChain::Open(img_, ChainOptions{.writable_top = true});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("refcounts cannot be rebuilt"),
            std::string::npos)
      << w.status();
  EXPECT_NE(w.status().message().find("L1 table"), std::string::npos)
      << w.status();
  EXPECT_TRUE(ReadFile(img_) == before);
}

}  // namespace
}  // namespace pvdisk::image::qcow2
