// Internal qcow2 snapshots. Without files: the snapshot table parsed from
// bytes (ids, names, dates, the disk size in the extra data), hostile
// tables refused (too many entries, past the end of the file, over other
// metadata, oversized extra data) and a snapshot whose L1 table is unusable
// listed with why. Through a real mount, with QEMU's tools as the judge:
// an image with two snapshots taken between qemu-io's pattern writes takes
// fio's verified writes, a model's writes and a discard through pvdisk;
// afterwards `qemu-img check` passes, each snapshot converts to what it did
// before, and the live disk equals what the mount showed and the model
// wrote; `pvdisk info` lists the snapshots; snapshot=NAME serves one
// read-only (EROFS for writes), an unknown name is refused listing the
// names there are, and hostile snapshot tables are refused with a message.
// A dirty image with snapshots (lazy refcounts, qemu-io aborted) has its
// refcounts rebuilt, snapshots counted, and is served read-write.
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"
#include "image/qcow2/endian.h"
#include "image/qcow2/layout.h"
#include "image/qcow2/snapshot_table.h"
#include "qemu_judge.h"

namespace pvdisk::fuse_testing {
namespace {

using image::qcow2::FindSnapshot;
using image::qcow2::MetadataLayout;
using image::qcow2::ParseSnapshotTable;
using image::qcow2::Qcow2Header;
using image::qcow2::Region;
using image::qcow2::Snapshot;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// One table entry as QEMU writes it.
std::vector<uint8_t> Entry(uint64_t l1_offset, uint32_t l1_size,
                           const std::string& id, const std::string& name,
                           uint32_t date_sec,
                           const std::vector<uint8_t>& extra) {
  const size_t unpadded = 40 + extra.size() + id.size() + name.size();
  std::vector<uint8_t> e((unpadded + 7) / 8 * 8, 0);
  image::qcow2::StoreBe64(e.data(), l1_offset);
  image::qcow2::StoreBe32(e.data() + 8, l1_size);
  e[13] = static_cast<uint8_t>(id.size());
  e[15] = static_cast<uint8_t>(name.size());
  image::qcow2::StoreBe32(e.data() + 16, date_sec);
  image::qcow2::StoreBe32(e.data() + 36, static_cast<uint32_t>(extra.size()));
  std::string tail(extra.begin(), extra.end());
  tail += id + name;
  std::memcpy(e.data() + 40, tail.data(), tail.size());
  return e;
}

// Extra data: 64-bit VM state size and the disk size.
std::vector<uint8_t> Extra(uint64_t vm_state, uint64_t disk_size) {
  std::vector<uint8_t> x(16);
  image::qcow2::StoreBe64(x.data(), vm_state);
  image::qcow2::StoreBe64(x.data() + 8, disk_size);
  return x;
}

// A 64 KiB-cluster image of 8 MiB whose file is 1 MiB: header, refcount
// table at 64 KiB, snapshot table at 128 KiB.
struct Fixture {
  Qcow2Header header;
  MetadataLayout layout;
  uint64_t file_size = kMiB;
  Fixture() {
    header.cluster_bits = 16;
    header.size = 8 * kMiB;
    header.snapshots_offset = 128 * kKiB;
    layout.Add(0, 64 * kKiB, Region::kHeader);
    layout.Add(64 * kKiB, 64 * kKiB, Region::kRefcountTable);
    layout.Add(128 * kKiB, 64 * kKiB, Region::kSnapshotTable);
  }
  absl::StatusOr<std::vector<Snapshot>> Parse(
      const std::vector<std::vector<uint8_t>>& entries, uint64_t count = ~0ull,
      uint64_t bytes_in_file = ~0ull) {
    std::vector<uint8_t> bytes;
    for (const auto& e : entries) bytes.insert(bytes.end(), e.begin(), e.end());
    header.nb_snapshots =
        static_cast<uint32_t>(count == ~0ull ? entries.size() : count);
    if (bytes_in_file != ~0ull) bytes.resize(bytes_in_file);
    return ParseSnapshotTable(header, bytes, file_size, layout, "t.qcow2");
  }
};

TEST(Qcow2SnapshotTableTest, EntriesParseWithIdsNamesDatesAndDiskSize) {
  Fixture f;
  absl::StatusOr<std::vector<Snapshot>> s =
      f.Parse({Entry(256 * kKiB, 1, "1", "before", 1000, Extra(0, 4 * kMiB)),
               Entry(320 * kKiB, 1, "2", "a longer name here", 2000, {})});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].id, "1");
  EXPECT_EQ((*s)[0].name, "before");
  EXPECT_EQ((*s)[0].date_sec, 1000u);
  EXPECT_EQ((*s)[0].disk_size, 4 * kMiB);
  EXPECT_EQ((*s)[0].l1_table_offset, 256 * kKiB);
  EXPECT_EQ((*s)[0].problem, "");
  // Without extra data the disk is the image's size.
  EXPECT_EQ((*s)[1].name, "a longer name here");
  EXPECT_EQ((*s)[1].disk_size, 8 * kMiB);
  EXPECT_EQ((*s)[1].problem, "");
  // Found by id first, then by name.
  EXPECT_EQ(FindSnapshot(*s, "2", "t.qcow2")->name, "a longer name here");
  EXPECT_EQ(FindSnapshot(*s, "before", "t.qcow2")->id, "1");
  absl::StatusOr<Snapshot> none = FindSnapshot(*s, "nope", "t.qcow2");
  ASSERT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(
      none.status().message().find("before (id 1), a longer name here (id 2)"),
      std::string::npos)
      << none.status();
}

TEST(Qcow2SnapshotTableTest, HostileTablesAreRefusedWithAMessage) {
  Fixture f;
  const std::vector<uint8_t> good = Entry(256 * kKiB, 1, "1", "s", 0, {});
  auto refused = [](const absl::StatusOr<std::vector<Snapshot>>& s,
                    const std::string& words) {
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
    EXPECT_NE(s.status().message().find(words), std::string::npos)
        << s.status();
  };
  refused(f.Parse({good}, 1'000'000), "at most 65536");
  // Two entries announced, one in the file.
  refused(f.Parse({good}, 2), "past the end of the file");
  // An entry cut short by the end of the file.
  refused(f.Parse({good}, 1, 30), "past the end of the file");
  refused(
      f.Parse({Entry(256 * kKiB, 1, "1", "s", 0, std::vector<uint8_t>(2000))}),
      "at most 1024");
  // A table long enough to run from its cluster into an L2 table after it.
  f.layout.Add(192 * kKiB, 64 * kKiB, Region::kL2Table);
  std::vector<std::vector<uint8_t>> many(
      800, Entry(256 * kKiB, 1, "1", "snapshot-with-a-long-name", 0,
                 Extra(0, 8 * kMiB)));
  refused(f.Parse(many), "overlaps an L2 table");
}

TEST(Qcow2SnapshotTableTest, UnusableSnapshotL1TablesAreListedWithWhy) {
  Fixture f;
  absl::StatusOr<std::vector<Snapshot>> s =
      f.Parse({Entry(2 * kMiB, 1, "1", "past", 0, {}),
               Entry(64 * kKiB, 1, "2", "over", 0, {}),
               Entry(256 * kKiB + 512, 1, "3", "unaligned", 0, {}),
               Entry(256 * kKiB, 0, "4", "small", 0, {}),
               Entry(256 * kKiB, 1, "5", "fine", 0, {})});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 5u);
  EXPECT_NE((*s)[0].problem.find("past the end of the file"),
            std::string::npos);
  EXPECT_NE((*s)[1].problem.find("overlaps the refcount table"),
            std::string::npos)
      << (*s)[1].problem;
  EXPECT_NE((*s)[2].problem.find("cluster boundary"), std::string::npos);
  EXPECT_NE((*s)[3].problem.find("cannot map its disk"), std::string::npos);
  EXPECT_EQ((*s)[4].problem, "");
  absl::StatusOr<Snapshot> past = FindSnapshot(*s, "past", "t.qcow2");
  EXPECT_TRUE(absl::IsFailedPrecondition(past.status())) << past.status();
}

// Runs qemu-io commands on `image` in one process.
void QemuIo(const std::string& image,
            const std::vector<std::string>& commands) {
  std::string line = "qemu-io";
  for (const std::string& c : commands) line += " -c '" + c + "'";
  ShOk(line + " '" + image + "'");
}

// 8 MiB, 64 KiB clusters: s1 after the first writes, s2 after more that
// overwrite part of them. The disk's one L2 table is then shared with s2
// (QEMU copied s1's at the first write after it): pvdisk's first write
// must copy it.
void MakeImageWithSnapshots(const std::string& image) {
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=64k '" + image + "' 8M");
  QemuIo(image, {"write -P 0x11 0 3M", "write -P 0x12 5M 1M"});
  ShOk("qemu-img snapshot -c s1 '" + image + "'");
  QemuIo(image,
         {"write -P 0x21 1M 1M", "write -P 0x22 4M 512k", "write -z 5M 128k"});
  ShOk("qemu-img snapshot -c s2 '" + image + "'");
}

TEST(Qcow2SnapshotMountTest, WritesThroughPvdiskLeaveEverySnapshotAsItWas) {
  PVDISK_REQUIRE_QEMU();
  PVDISK_REQUIRE_FIO();
  TempDir dir;
  const std::string image = dir.Path("img.qcow2");
  MakeImageWithSnapshots(image);
  const TwoSnapshots before = SnapshotsBefore(dir, image);
  ASSERT_NE(before.s1, before.s2);
  // The model: the live disk as QEMU shows it, then written as below.
  std::string model = QemuRaw(dir, image);
  const std::string shown = dir.Path("shown.raw");
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    const std::string disk = mount.Path("img.qcow2");
    {
      Fd fd = Open(disk, O_RDWR);
      ASSERT_TRUE(fd.valid()) << std::strerror(errno);
      // Into clusters all three share, two share, and the live disk's own;
      // unaligned, across clusters, and into never-written ones.
      const std::vector<std::pair<uint64_t, uint64_t>> writes = {
          {4096, 4096},           {1 * kMiB + 100, 70 * kKiB},
          {2 * kMiB, 8 * kKiB},   {4 * kMiB + 60 * kKiB, 200 * kKiB},
          {5 * kMiB + 512, 1024}, {7 * kMiB, 64 * kKiB}};
      for (size_t i = 0; i < writes.size(); ++i) {
        const std::string bytes = PatternBytes(i + 1, writes[i].second);
        PwriteAll(fd.get(), writes[i].first, bytes);
        model.replace(writes[i].first, bytes.size(), bytes);
      }
      // A discard of clusters the snapshots share gives back only this
      // disk's references.
      ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                          256 * kKiB, 128 * kKiB),
                0)
          << std::strerror(errno);
      model.replace(256 * kKiB, 128 * kKiB, 128 * kKiB, '\0');
      ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
      EXPECT_EQ(FirstDifference(model, PreadAll(fd.get(), 0, 8 * kMiB)), "");
    }
    // fio's verified writes over [6 MiB, 8 MiB) and [512 KiB, 1 MiB).
    ExpectFioClean(RunCommand(FioCommand(
        disk,
        {"--rw=randwrite", "--bs=4k", "--offset=6m", "--size=2m", "--iodepth=8",
         "--number_ios=128", "--verify=crc32c", "--do_verify=1"})));
    ExpectFioClean(RunCommand(
        FioCommand(disk, {"--rw=randwrite", "--bs=16k", "--offset=512k",
                          "--size=512k", "--iodepth=4", "--number_ios=32",
                          "--verify=crc32c", "--do_verify=1"})));
    const DiskStats stats = StatsOf(mount.mountpoint(), "img.qcow2");
    EXPECT_GT(stats["cow_bytes"], 0u);
    EXPECT_GT(stats["clusters_allocated"], 0u);
    ShOk("cp '" + disk + "' '" + shown + "'");
  }
  ExpectCheckedAndSnapshotsKept(dir, image, before);
  const std::string live = QemuRaw(dir, image);
  EXPECT_EQ(FirstDifference(ReadWholeFile(shown), live), "");
  // Outside fio's ranges the live disk is the model.
  EXPECT_EQ(
      FirstDifference(model.substr(0, 512 * kKiB), live.substr(0, 512 * kKiB)),
      "");
  EXPECT_EQ(FirstDifference(model.substr(kMiB, 5 * kMiB),
                            live.substr(kMiB, 5 * kMiB), kMiB),
            "");
}

// A dirty image with snapshots (lazy refcounts, and qemu-io aborted after
// allocating writes: the refcounts in the file are stale): pvdisk counts
// the refcounts anew, the snapshots' tables and the clusters they share
// included, and serves it read-write. Writes into clusters every snapshot
// shares, one shares and the live disk's own then leave an image qemu-img
// check passes, with every snapshot as it was.
TEST(Qcow2SnapshotMountTest, DirtyImageWithSnapshotsIsRebuiltAndServed) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  const std::string image = dir.Path("img.qcow2");
  // 4 KiB clusters: an L2 table maps 2 MiB, so the abort's writes copy
  // only some tables, and the rest stay shared by s2 and the live disk
  // (counted twice, with every cluster they name).
  ShOk("qemu-img create -q -f qcow2 -o cluster_size=4k,lazy_refcounts=on '" +
       image + "' 8M");
  QemuIo(image, {"write -P 0x11 0 3M", "write -P 0x12 5M 1M"});
  ShOk("qemu-img snapshot -c s1 '" + image + "'");
  QemuIo(image, {"write -P 0x21 1M 1M", "write -P 0x22 4M 512k"});
  ShOk("qemu-img snapshot -c s2 '" + image + "'");
  const TwoSnapshots before = SnapshotsBefore(dir, image);
  // qemu-io aborts (exits non-zero by design) after new clusters and a
  // write into a shared one.
  Sh("qemu-io -c 'write -P 0x31 6M 256k' -c 'write -P 0x32 2M 64k' "
     "-c abort '" +
     image + "'");
  ASSERT_EQ(Be64(ReadWholeFile(image), 72) & 1, 1u)
      << "qemu-io left no dirty image";
  std::string model = QemuRaw(dir, image);
  {
    Mount mount(dir.MakeDir("mnt"), {"--disk", image});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    Fd fd = Open(mount.Path("img.qcow2"), O_RDWR);
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    // Shared by s1, s2 and the disk; by s2 and the disk; the disk's own
    // (written before the abort); never written.
    const std::vector<std::pair<uint64_t, uint64_t>> writes = {
        {8 * kKiB, 4 * kKiB},
        {1 * kMiB + 64 * kKiB, 100 * kKiB},
        {6 * kMiB + 4 * kKiB, 8 * kKiB},
        {7 * kMiB, 192 * kKiB}};
    for (size_t i = 0; i < writes.size(); ++i) {
      const std::string bytes = PatternBytes(i + 7, writes[i].second);
      PwriteAll(fd.get(), writes[i].first, bytes);
      model.replace(writes[i].first, bytes.size(), bytes);
    }
    ASSERT_EQ(fsync(fd.get()), 0) << std::strerror(errno);
    EXPECT_EQ(FirstDifference(model, PreadAll(fd.get(), 0, 8 * kMiB)), "");
  }
  EXPECT_EQ(Be64(ReadWholeFile(image), 72) & 1, 0u) << "still dirty";
  ExpectCheckedAndSnapshotsKept(dir, image, before);
  EXPECT_EQ(FirstDifference(model, QemuRaw(dir, image)), "");
}

TEST(Qcow2SnapshotMountTest, SnapshotServedReadOnlyAndListedByInfo) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  const std::string image = dir.Path("img.qcow2");
  MakeImageWithSnapshots(image);

  CommandResult info = RunPvdisk({"info", image});
  ASSERT_EQ(info.exit_code, 0) << info.Describe();
  EXPECT_NE(info.out.find("snapshots:"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("  1         s1"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("  2         s2"), std::string::npos) << info.out;
  CommandResult json = RunPvdisk({"info", image, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.Describe();
  EXPECT_NE(json.out.find("\"snapshots\": [{\"id\": \"1\", \"name\": \"s1\", "
                          "\"disk_size\": 8388608"),
            std::string::npos)
      << json.out;

  {
    // s1 by name, and s2 by id from a copy (an image is served once).
    const std::string copy = dir.Path("same.qcow2");
    ShOk("cp '" + image + "' '" + copy + "'");
    Mount mount(dir.MakeDir("mnt"), {"--disk", image + ",snapshot=s1", "--disk",
                                     copy + ",snapshot=2"});
    ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
    EXPECT_EQ(FirstDifference(SnapshotRaw(dir, image, "s1"),
                              ReadWholeFile(mount.Path("img.qcow2"))),
              "");
    EXPECT_EQ(FirstDifference(SnapshotRaw(dir, image, "s2"),
                              ReadWholeFile(mount.Path("same.qcow2"))),
              "");
    Fd w = Open(mount.Path("img.qcow2"), O_WRONLY);
    EXPECT_FALSE(w.valid());
    EXPECT_EQ(errno, EROFS);
  }

  Mount unknown(dir.MakeDir("mnt2"), {"--disk", image + ",snapshot=nope"});
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.mount_result().err.find(
                "no snapshot named nope; its snapshots: s1 (id 1), s2 (id 2)"),
            std::string::npos)
      << unknown.mount_result().Describe();
}

// Patches a big-endian field of a file.
void Patch(const std::string& path, uint64_t offset, uint64_t value,
           int width) {
  std::string bytes = ReadWholeFile(path);
  for (int i = width - 1; i >= 0; --i, value >>= 8) {
    bytes[offset + i] = static_cast<char>(value);
  }
  WriteWholeFile(path, bytes);
}

TEST(Qcow2SnapshotMountTest, HostileSnapshotTablesAreRefusedWithAMessage) {
  PVDISK_REQUIRE_QEMU();
  TempDir dir;
  const std::string image = dir.Path("img.qcow2");
  MakeImageWithSnapshots(image);
  const std::string original = ReadWholeFile(image);
  const uint64_t table = image::qcow2::LoadBe64(
      reinterpret_cast<const uint8_t*>(original.data()) + 64);
  struct Case {
    const char* what;
    uint64_t offset;
    uint64_t value;
    int width;
    const char* message;
  };
  const Case cases[] = {
      {"huge nb_snapshots", 60, 0x7fffffff, 4, "at most 65536"},
      {"more entries than the file holds", 60, 60000, 4,
       "qcow2 snapshot table: entry "},
      {"table past the file", 64, 1ull << 40, 8, "past the end of the file"},
      {"table over the L1 table", 64,
       image::qcow2::LoadBe64(
           reinterpret_cast<const uint8_t*>(original.data()) + 40),
       8, "overlaps the L1 table"},
  };
  int round = 0;
  for (const Case& c : cases) {
    ++round;
    WriteWholeFile(image, original);
    Patch(image, c.offset, c.value, c.width);
    CommandResult info = RunPvdisk({"info", image});
    EXPECT_NE(info.exit_code, 0) << c.what;
    EXPECT_NE(info.err.find(c.message), std::string::npos)
        << c.what << ": " << info.Describe();
    Mount mount(dir.MakeDir("mnt" + std::to_string(round)), {"--disk", image});
    EXPECT_FALSE(mount.ok()) << c.what;
    EXPECT_NE(mount.mount_result().err.find(c.message), std::string::npos)
        << c.what << ": " << mount.mount_result().Describe();
  }
  // s1's L1 table past the end of the file: the image serves, s1 does not.
  WriteWholeFile(image, original);
  Patch(image, table, 1ull << 40, 8);
  CommandResult info = RunPvdisk({"info", image});
  ASSERT_EQ(info.exit_code, 0) << info.Describe();
  EXPECT_NE(info.out.find("unusable: its L1 table"), std::string::npos)
      << info.out;
  {
    Mount mount(dir.MakeDir("mnt-ro"), {"--disk", image + ",ro"});
    EXPECT_TRUE(mount.ok()) << mount.mount_result().Describe();
  }
  Mount s1(dir.MakeDir("mnt-s1"), {"--disk", image + ",snapshot=s1"});
  EXPECT_FALSE(s1.ok());
  EXPECT_NE(s1.mount_result().err.find("snapshot s1 cannot be used: its L1 "
                                       "table"),
            std::string::npos)
      << s1.mount_result().Describe();
}

}  // namespace
}  // namespace pvdisk::fuse_testing
