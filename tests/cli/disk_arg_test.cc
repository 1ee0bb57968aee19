#include "cli/disk_arg.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg(text);
  EXPECT_FALSE(spec.ok()) << text;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ParseDiskArgTest, PathOnly) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("images/disk0.img");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, "images/disk0.img");
  EXPECT_FALSE(spec->read_only);
  EXPECT_FALSE(spec->expected_size.has_value());
  EXPECT_FALSE(spec->fault.has_value());
}

TEST(ParseDiskArgTest, ReadOnly) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("/tmp/a.img,ro");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, "/tmp/a.img");
  EXPECT_TRUE(spec->read_only);
}

TEST(ParseDiskArgTest, LockIsOnUnlessTurnedOff) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("a.img");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->lock);
  spec = ParseDiskArg("a.img,lock=off,ro");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->lock);
  EXPECT_TRUE(spec->read_only);
  spec = ParseDiskArg("a.img,lock=off,lock=on");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->lock);
  std::string message = ErrorOf("a.img,lock=maybe");
  EXPECT_TRUE(Contains(message, "unknown option 'lock=maybe'")) << message;
  EXPECT_TRUE(Contains(message, "lock=on|off")) << message;
}

TEST(ParseDiskArgTest, FormatIsProbedUnlessGiven) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("a.img");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->format, image::ImageFormat::kProbe);
  spec = ParseDiskArg("a.img,format=raw");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->format, image::ImageFormat::kRaw);
  spec = ParseDiskArg("a.img,ro,format=qcow2");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->format, image::ImageFormat::kQcow2);
  EXPECT_EQ(fuse::ImageSpecOf(*spec, io::EngineKind::kUring).format,
            image::ImageFormat::kQcow2);
  std::string message = ErrorOf("a.img,format=vmdk");
  EXPECT_TRUE(Contains(message, "format takes raw or qcow2, not 'vmdk'"))
      << message;
  message = ErrorOf("a.img,format=");
  EXPECT_TRUE(Contains(message, "format takes raw or qcow2")) << message;
  message = ErrorOf("rbd:pool/image,format=raw");
  EXPECT_TRUE(Contains(message, "format= applies to image files")) << message;
}

TEST(ParseDiskArgTest, SnapshotIsServedReadOnly) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("a.qcow2,snapshot=s1");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->snapshot, "s1");
  EXPECT_TRUE(spec->read_only);
  const image::ImageSpec image =
      fuse::ImageSpecOf(*spec, io::EngineKind::kUring);
  EXPECT_EQ(image.snapshot, "s1");
  EXPECT_TRUE(image.read_only);
  spec = ParseDiskArg("a.qcow2");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->snapshot, "");
  EXPECT_FALSE(spec->read_only);
  const std::string message = ErrorOf("a.qcow2,snapshot=");
  EXPECT_TRUE(Contains(message, "snapshot takes the id or name")) << message;
}

TEST(ParseDiskArgTest, Size) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("a.img,size=1G");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->expected_size, std::optional<uint64_t>(uint64_t{1} << 30));
  EXPECT_FALSE(spec->read_only);
}

TEST(ParseDiskArgTest, FaultRange) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("a.img,eio=2048+8");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->fault.has_value());
  EXPECT_EQ(spec->fault->first_sector, 2048u);
  EXPECT_EQ(spec->fault->sector_count, 8u);

  spec = ParseDiskArg("a.img,eio=5");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->fault.has_value());
  EXPECT_EQ(spec->fault->first_sector, 5u);
  EXPECT_EQ(spec->fault->sector_count, 1u);

  spec = ParseDiskArg("a.img,eio=0");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->fault->first_sector, 0u);
}

TEST(ParseDiskArgTest, AllOptionsTogether) {
  absl::StatusOr<fuse::DiskSpec> spec =
      ParseDiskArg("dir/x.img,ro,size=4k,eio=7+2");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, "dir/x.img");
  EXPECT_TRUE(spec->read_only);
  EXPECT_EQ(spec->expected_size, std::optional<uint64_t>(4096));
  ASSERT_TRUE(spec->fault.has_value());
  EXPECT_EQ(spec->fault->first_sector, 7u);
  EXPECT_EQ(spec->fault->sector_count, 2u);
}

TEST(ParseDiskArgTest, BadFaultRange) {
  for (const char* text :
       {"a.img,eio=", "a.img,eio=x", "a.img,eio=5+0", "a.img,eio=5+",
        "a.img,eio=+", "a.img,eio=1+2+3", "a.img,eio=-1", "a.img,eio=1.5",
        "a.img,eio=99999999999999999999999"}) {
    std::string message = ErrorOf(text);
    EXPECT_TRUE(Contains(message, std::string("--disk ") + text)) << message;
    EXPECT_TRUE(Contains(message, "SECTOR+COUNT")) << message;
  }
}

TEST(ParseDiskArgTest, BadSizeNamesTheArgumentAndTheParseError) {
  std::string message = ErrorOf("a.img,size=12Q");
  EXPECT_TRUE(Contains(message, "--disk a.img,size=12Q")) << message;
  EXPECT_TRUE(Contains(message, "'12Q'")) << message;
  EXPECT_FALSE(ErrorOf("a.img,size=").empty());
  EXPECT_FALSE(ErrorOf("a.img,size=0").empty());
}

TEST(ParseDiskArgTest, UnknownOption) {
  std::string message = ErrorOf("a.img,rw");
  EXPECT_TRUE(Contains(message, "unknown option 'rw'")) << message;
  EXPECT_TRUE(Contains(message, "ro")) << message;
  EXPECT_TRUE(Contains(message, "size=SIZE")) << message;
  EXPECT_TRUE(Contains(message, "eio=SECTOR[+COUNT]")) << message;
  EXPECT_TRUE(Contains(ErrorOf("a.img,"), "unknown option ''"));
  EXPECT_TRUE(Contains(ErrorOf("a.img,RO"), "unknown option 'RO'"));
  EXPECT_TRUE(Contains(ErrorOf("a.img,ro=1"), "unknown option 'ro=1'"));
}

// Test-only faults come through PVDISK_TEST_FAULT (io/test_fault.h), never
// through --disk: the grammar neither takes nor names them.
TEST(ParseDiskArgTest, TestFaultsAreNotDiskOptions) {
  std::string message = ErrorOf("a.img,engine_fail=300");
  EXPECT_TRUE(Contains(message, "unknown option 'engine_fail=300'")) << message;
  EXPECT_FALSE(Contains(message, "test only")) << message;
  EXPECT_FALSE(Contains(ErrorOf("a.img,x"), "engine_fail"));
}

TEST(ParseDiskArgTest, DelayAppliesToAllAndDelayWriteOverridesWrites) {
  EXPECT_FALSE(ParseDiskArg("a.img")->delay.has_value());
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("a.img,delay=2000");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->delay.has_value());
  EXPECT_EQ(spec->delay->us, 2000u);
  EXPECT_EQ(spec->delay->write_us, 2000u);
  // In either order, and each alone.
  for (const char* text : {"a.img,delay=2000,delay-write=500",
                           "a.img,delay-write=500,delay=2000"}) {
    spec = ParseDiskArg(text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->delay->us, 2000u) << text;
    EXPECT_EQ(spec->delay->write_us, 500u) << text;
  }
  spec = ParseDiskArg("a.img,delay-write=700");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->delay->us, 0u);
  EXPECT_EQ(spec->delay->write_us, 700u);
  spec = ParseDiskArg("a.img,delay=0,delay-write=10000000");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->delay->write_us, 10000000u);
}

TEST(ParseDiskArgTest, BadDelayNamesTheKeyAndTheRange) {
  for (const char* text :
       {"a.img,delay=", "a.img,delay=-1", "a.img,delay=+5", "a.img,delay=2ms",
        "a.img,delay= 5", "a.img,delay=10000001", "a.img,delay=99999999999"}) {
    std::string message = ErrorOf(text);
    EXPECT_TRUE(Contains(message, std::string("--disk ") + text)) << message;
    EXPECT_TRUE(Contains(message,
                         ": delay takes microseconds from 0 to "
                         "10000000"))
        << message;
    EXPECT_TRUE(Contains(message, "e.g. delay=2000")) << message;
  }
  std::string message = ErrorOf("a.img,delay-write=x");
  EXPECT_TRUE(Contains(message, "delay-write takes microseconds")) << message;
  message = ErrorOf("a.img,delays=5");
  EXPECT_TRUE(Contains(message, "unknown option 'delays=5'")) << message;
  EXPECT_TRUE(Contains(message, "delay=US, delay-write=US")) << message;
}

TEST(ParseDiskArgTest, EmptyPath) {
  for (const char* text : {"", ",ro", ",size=1G"}) {
    std::string message = ErrorOf(text);
    EXPECT_TRUE(Contains(message, "needs an image path")) << message;
    EXPECT_TRUE(Contains(message, "PATH[,ro]")) << message;
  }
}

TEST(ParseDiskArgTest, RbdImageWithItsOptions) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg(
      "rbd:pool1/disk-a,conf=/etc/ceph/c.conf,id=pvdisk,timeout=7,ro,"
      "size=1G,eio=8+8");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->rbd.has_value());
  EXPECT_EQ(spec->rbd->pool, "pool1");
  EXPECT_EQ(spec->rbd->image, "disk-a");
  EXPECT_EQ(spec->rbd->conf, "/etc/ceph/c.conf");
  EXPECT_EQ(spec->rbd->id, "pvdisk");
  EXPECT_EQ(spec->rbd->timeout_seconds, 7u);
  EXPECT_EQ(spec->rbd->Name(), "rbd:pool1/disk-a");
  EXPECT_TRUE(spec->read_only);
  EXPECT_EQ(spec->expected_size, uint64_t{1} << 30);
  ASSERT_TRUE(spec->fault.has_value());
  EXPECT_FALSE(spec->lock) << "an RBD image has its own lock";
}

TEST(ParseDiskArgTest, RbdDefaults) {
  absl::StatusOr<fuse::DiskSpec> spec = ParseDiskArg("rbd:rbd/img");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->rbd.has_value());
  EXPECT_EQ(spec->rbd->conf, "");
  EXPECT_EQ(spec->rbd->id, "");
  EXPECT_EQ(spec->rbd->timeout_seconds, io::kDefaultRbdTimeoutSeconds);
  EXPECT_FALSE(ParseDiskArg("images/rbd:x").value().rbd.has_value());
}

TEST(ParseDiskArgTest, BadRbdSpecs) {
  for (const char* text :
       {"rbd:", "rbd:img", "rbd:/img", "rbd:pool/", "rbd:a/b/c"}) {
    EXPECT_TRUE(Contains(ErrorOf(text), "rbd:POOL/IMAGE")) << text;
  }
  EXPECT_TRUE(Contains(ErrorOf("rbd:p/i@s"), "snapshots"));
  EXPECT_TRUE(Contains(ErrorOf("rbd:p/i,lock=off"), "own exclusive lock"));
  for (const char* text :
       {"rbd:p/i,timeout=0", "rbd:p/i,timeout=x", "rbd:p/i,timeout=3601"}) {
    EXPECT_TRUE(Contains(ErrorOf(text), "timeout takes")) << text;
  }
  EXPECT_TRUE(Contains(ErrorOf("rbd:p/i,conf="), "unknown option 'conf='"));
  // The rbd-only options on an image file are unknown there.
  EXPECT_TRUE(Contains(ErrorOf("disk.img,conf=/x"), "unknown option"));
}

}  // namespace
}  // namespace pvdisk::cli
