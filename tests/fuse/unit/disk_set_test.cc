// DiskSet on real disks (image files, queues, backend threads): what a
// request finds while disks come and go, the gate a detach waits at, open
// handles and their pids; and the control file's command syntax.
#include "fuse/disk_set.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "fuse/disk.h"
#include "fuse/disk_control.h"
#include "fuse/inodes.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse {
namespace {

constexpr uint64_t kImageBytes = 1 << 20;

class DiskSetTest : public ::testing::Test {
 protected:
  // A started disk named `name` over a new image `file` (default: `name`)
  // of kImageBytes.
  std::unique_ptr<Disk> OpenDisk(const std::string& name,
                                 const std::string& file = "") {
    const std::string path = dir_.File(file.empty() ? name : file);
    int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(ftruncate(fd, kImageBytes), 0);
    close(fd);
    DiskSpec spec;
    spec.path = path;
    spec.arg = path;
    DiskOptions options;
    options.engine = io::EngineKind::kSync;
    absl::StatusOr<std::unique_ptr<Disk>> disk =
        Disk::Open(spec, name, options);
    EXPECT_TRUE(disk.ok()) << disk.status();
    if (!disk.ok()) return nullptr;
    (*disk)->Start();
    return *std::move(disk);
  }

  static std::string NoReason(const Disk&) { return ""; }

  pvdisk::testing::TempDir dir_{"disk_set_test"};
};

std::vector<std::unique_ptr<Disk>> One(std::unique_ptr<Disk> disk) {
  std::vector<std::unique_ptr<Disk>> disks;
  disks.push_back(std::move(disk));
  return disks;
}

TEST_F(DiskSetTest, AttachedDiskGetsANewInodeAndDetachedOneIsGone) {
  DiskSet set(One(OpenDisk("a.img")));
  ASSERT_TRUE(set.Add(OpenDisk("b.img")).ok());
  DiskRef b = set.EnterByName("b.img");
  ASSERT_TRUE(b);
  const uint64_t b_inode = b.inode();
  EXPECT_EQ(b_inode, DiskInode(1));
  b = DiskRef();
  absl::StatusOr<DetachedDisk> detached =
      set.Remove("b.img", false, &DiskSetTest::NoReason);
  ASSERT_TRUE(detached.ok()) << detached.status();
  detached->disk->Shutdown();
  EXPECT_FALSE(set.Enter(b_inode));
  EXPECT_FALSE(set.EnterByName("b.img"));
  EXPECT_TRUE(DiskSet::IsDiskInode(b_inode));
  // The same name again: a new inode, never the old one.
  ASSERT_TRUE(set.Add(OpenDisk("b2.img")).ok());
  EXPECT_FALSE(set.Enter(b_inode));
  ASSERT_EQ(set.EnterAll().size(), 2u);
  EXPECT_EQ(set.EnterAll()[1].inode(), DiskInode(2));
}

TEST_F(DiskSetTest, DuplicateNameAndUnknownDiskAreRefused) {
  DiskSet set(One(OpenDisk("a.img")));
  std::unique_ptr<Disk> same_name = OpenDisk("a.img", "other.img");
  absl::Status added = set.Add(std::move(same_name));
  EXPECT_EQ(added.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(set.EnterAll().size(), 1u);
  absl::StatusOr<DetachedDisk> missing =
      set.Remove("zz.img", false, &DiskSetTest::NoReason);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("a.img"), std::string::npos)
      << missing.status();
}

TEST_F(DiskSetTest, OpenHandleMakesDetachBusyWithThePidUnlessForced) {
  DiskSet set(One(OpenDisk("a.img")));
  const uint64_t inode = DiskInode(0);
  const int64_t handle = set.OpenHandle(inode, 4242);
  ASSERT_GT(handle, 0);
  absl::StatusOr<DetachedDisk> busy =
      set.Remove("a.img", false, &DiskSetTest::NoReason);
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(busy.status().message().find("pid 4242"), std::string::npos)
      << busy.status();
  EXPECT_TRUE(set.Enter(inode));  // still there
  set.ReleaseHandle(inode, static_cast<uint64_t>(handle));
  const int64_t again = set.OpenHandle(inode, 4343);
  absl::StatusOr<DetachedDisk> forced =
      set.Remove("a.img", true, &DiskSetTest::NoReason);
  ASSERT_TRUE(forced.ok()) << forced.status();
  forced->disk->Shutdown();
  EXPECT_EQ(set.OpenHandle(inode, 1), -ENOENT);
  set.ReleaseHandle(inode, static_cast<uint64_t>(again));  // harmless
}

TEST_F(DiskSetTest, DetachWaitsForTheRequestInsideTheGate) {
  DiskSet set(One(OpenDisk("a.img")));
  DiskRef inside = set.Enter(DiskInode(0));
  ASSERT_TRUE(inside);
  std::future<absl::StatusOr<DetachedDisk>> removing =
      std::async(std::launch::async,
                 [&] { return set.Remove("a.img", false, &NoReason); });
  // The disk leaves the table at once: nobody new gets in ...
  while (set.EnterByName("a.img")) {
  }
  EXPECT_FALSE(set.Enter(DiskInode(0)));
  // ... but the detach waits for the one inside.
  EXPECT_EQ(removing.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  EXPECT_EQ(inside.disk().name(), "a.img");  // still valid
  inside = DiskRef();
  absl::StatusOr<DetachedDisk> detached = removing.get();
  ASSERT_TRUE(detached.ok()) << detached.status();
  detached->disk->Shutdown();
}

TEST_F(DiskSetTest, ADiskItsPlacementKeepsIsRefused) {
  DiskSet set(One(OpenDisk("a.img")));
  absl::StatusOr<DetachedDisk> refused = set.Remove(
      "a.img", false,
      [](const Disk&) -> std::string { return "kept by its placement"; });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(set.EnterByName("a.img"));
}

TEST(ControlRequestTest, ParsesWhatTheClientWrites) {
  ControlRequest attach;
  attach.command = ControlRequest::Command::kAttach;
  attach.words = {"--disk", "/x/b.img,ro", "--queues", "2"};
  absl::StatusOr<ControlRequest> parsed =
      ParseControlRequest(FormatControlRequest(attach));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->command, ControlRequest::Command::kAttach);
  EXPECT_EQ(parsed->words, attach.words);

  ControlRequest detach;
  detach.command = ControlRequest::Command::kDetach;
  detach.disk = "b.img";
  detach.force = true;
  parsed = ParseControlRequest(FormatControlRequest(detach));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->disk, "b.img");
  EXPECT_TRUE(parsed->force);
}

TEST(ControlRequestTest, RefusesAnythingElse) {
  for (const char* bad :
       {"", "reset", "attach", "attach\n", "detach", "detach\n\n",
        "detach\na/b.img", "detach\nb.img\n--now", "detach\nb\n--force\nx",
        "\xff\xfe"}) {
    absl::StatusOr<ControlRequest> parsed = ParseControlRequest(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace pvdisk::fuse
