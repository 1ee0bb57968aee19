#include "cli/mount_table.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

namespace fs = std::filesystem;

// The shared scratch directory, plus its path with symlinks resolved, as
// realpath gives it.
class TempDir : public pvdisk::testing::TempDir {
 public:
  TempDir() : pvdisk::testing::TempDir("pvdisk_cli") {}
  std::string canonical() const { return fs::canonical(path()).string(); }
};

std::string Cwd() {
  char buffer[PATH_MAX];
  EXPECT_NE(getcwd(buffer, sizeof(buffer)), nullptr);
  return fs::canonical(buffer).string();
}

TEST(AbsoluteMountPathTest, Root) {
  EXPECT_EQ(AbsoluteMountPath("/"), std::optional<std::string>("/"));
  EXPECT_EQ(AbsoluteMountPath("//"), std::optional<std::string>("/"));
}

TEST(AbsoluteMountPathTest, AbsolutePathsWithTrailingSlashes) {
  TempDir dir;
  const std::string expected = dir.canonical() + "/mnt";
  fs::create_directory(dir.path() + "/mnt");
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "/mnt"), expected);
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "/mnt/"), expected);
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "/mnt///"), expected);
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "//mnt"), expected);
  EXPECT_EQ(AbsoluteMountPath(dir.canonical()), dir.canonical());
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "/"), dir.canonical());
}

TEST(AbsoluteMountPathTest, LastComponentNeedNotExist) {
  // A mount point whose daemon died cannot be stat'ed; only its parent is
  // resolved.
  TempDir dir;
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "/gone"), dir.canonical() + "/gone");
}

TEST(AbsoluteMountPathTest, ParentSymlinksResolvedLastComponentNot) {
  TempDir dir;
  fs::create_directory(dir.path() + "/real");
  fs::create_directory(dir.path() + "/real/mnt");
  fs::create_directory_symlink(dir.path() + "/real", dir.path() + "/link");
  fs::create_directory_symlink(dir.path() + "/real/mnt",
                               dir.path() + "/real/mntlink");
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "/link/mnt"),
            dir.canonical() + "/real/mnt");
  EXPECT_EQ(AbsoluteMountPath(dir.path() + "/real/mntlink"),
            dir.canonical() + "/real/mntlink");
}

TEST(AbsoluteMountPathTest, RelativePaths) {
  const std::string cwd = Cwd();
  EXPECT_EQ(AbsoluteMountPath("pvdisk-not-here"),
            (cwd == "/" ? "" : cwd) + "/pvdisk-not-here");
  EXPECT_EQ(AbsoluteMountPath("pvdisk-not-here/"),
            (cwd == "/" ? "" : cwd) + "/pvdisk-not-here");
  EXPECT_EQ(AbsoluteMountPath("."), cwd);
  EXPECT_EQ(AbsoluteMountPath("./"), cwd);
  EXPECT_EQ(AbsoluteMountPath(".."), fs::path(cwd).parent_path().string());
}

TEST(AbsoluteMountPathTest, RelativeToAnotherDirectory) {
  TempDir dir;
  fs::create_directory(dir.path() + "/sub");
  const std::string saved = Cwd();
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  std::optional<std::string> nested = AbsoluteMountPath("sub/mnt");
  std::optional<std::string> dotted = AbsoluteMountPath("./sub/../mnt");
  std::optional<std::string> dot_dot = AbsoluteMountPath("sub/..");
  ASSERT_EQ(chdir(saved.c_str()), 0);
  EXPECT_EQ(nested, dir.canonical() + "/sub/mnt");
  EXPECT_EQ(dotted, dir.canonical() + "/mnt");
  EXPECT_EQ(dot_dot, dir.canonical());
}

TEST(AbsoluteMountPathTest, MissingParentOrEmpty) {
  EXPECT_EQ(AbsoluteMountPath("/pvdisk-no-such-dir-4711/mnt"), std::nullopt);
  EXPECT_EQ(AbsoluteMountPath(""), std::nullopt);
}

TEST(FindMountTest, FindsTheRootMount) {
  std::optional<MountEntry> root = FindMount("/");
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->mount_point, "/");
  EXPECT_FALSE(root->fs_type.empty());
  EXPECT_FALSE(root->source.empty());
}

TEST(FindMountTest, FindsProc) {
  // This very test reads /proc/self/mountinfo, so /proc is mounted.
  std::optional<MountEntry> proc = FindMount("/proc");
  ASSERT_TRUE(proc.has_value());
  EXPECT_EQ(proc->mount_point, "/proc");
  EXPECT_EQ(proc->fs_type, "proc");
}

TEST(FindMountTest, PlainDirectoryIsNotAMount) {
  TempDir dir;
  EXPECT_EQ(FindMount(dir.canonical()), std::nullopt);
  EXPECT_EQ(FindMount(dir.canonical() + "/"), std::nullopt);
  EXPECT_EQ(FindMount(""), std::nullopt);
}

TEST(PvdiskDaemonPidTest, PvdiskMount) {
  EXPECT_EQ(PvdiskDaemonPid({"/mnt/pv", "fuse.pvdisk", "pvdisk-1234"}),
            std::optional<pid_t>(1234));
  EXPECT_EQ(PvdiskDaemonPid({"/x", "fuse.pvdisk", "pvdisk-1"}),
            std::optional<pid_t>(1));
  EXPECT_EQ(PvdiskDaemonPid({"/x", "fuse.pvdisk", "pvdisk-2147483647"}),
            std::optional<pid_t>(2147483647));
}

TEST(PvdiskDaemonPidTest, OtherMountsOrBadSources) {
  EXPECT_EQ(PvdiskDaemonPid({"/", "ext4", "/dev/vda"}), std::nullopt);
  EXPECT_EQ(PvdiskDaemonPid({"/x", "fuse", "pvdisk-1234"}), std::nullopt);
  EXPECT_EQ(PvdiskDaemonPid({"/x", "fuse.sshfs", "pvdisk-1234"}), std::nullopt);
  EXPECT_EQ(PvdiskDaemonPid({"/x", "fuse.pvdisk", "other-1234"}), std::nullopt);
  EXPECT_EQ(PvdiskDaemonPid({"/x", "fuse.pvdisk", "xpvdisk-1234"}),
            std::nullopt);
  for (const char* source :
       {"pvdisk-", "pvdisk-abc", "pvdisk-12x", "pvdisk-0", "pvdisk--5",
        "pvdisk-2147483648", "pvdisk-99999999999", "pvdisk", ""}) {
    EXPECT_EQ(PvdiskDaemonPid({"/x", "fuse.pvdisk", source}), std::nullopt)
        << source;
  }
}

}  // namespace
}  // namespace pvdisk::cli
