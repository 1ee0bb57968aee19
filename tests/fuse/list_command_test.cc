// `pvdisk list`: the mounts this test makes appear, with their daemons,
// disks, sizes and non-default flags, and are gone after their unmount.
// Other pvdisk mounts on the machine (other tests) may be listed too.
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// The entry of `pvdisk list --json` for `mountpoint`, or nullptr.
const JsonValue* Listed(const JsonValue& list, const std::string& mountpoint) {
  for (const JsonValue& mount : list.Find("mounts")->array) {
    if (mount.Find("mountpoint")->string == mountpoint) return &mount;
  }
  return nullptr;
}

JsonValue ListJson() {
  CommandResult list = RunPvdisk({"list", "--json"});
  EXPECT_EQ(list.exit_code, 0) << list.Describe();
  std::string error;
  std::optional<JsonValue> json = ParseJson(list.out, &error);
  EXPECT_TRUE(json.has_value()) << error << list.out;
  return json.value_or(JsonValue());
}

bool HasFlag(const JsonValue& mount, const std::string& flag) {
  for (const JsonValue& f : mount.Find("flags")->array) {
    if (f.string == flag) return true;
  }
  return false;
}

TEST(ListCommandTest, ShowsTwoMountsThenNone) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("a.img"), 4 * kMiB);
  CreateImage(dir.Path("b.img"), 8 * kMiB);
  CreateImage(dir.Path("c.img"), 12 * kMiB);
  std::string first_mountpoint;
  std::string second_mountpoint;
  {
    Mount first(dir.MakeDir("one"), {"--disk", dir.Path("a.img")});
    Mount second(
        dir.MakeDir("two"),
        {"--disk", dir.Path("b.img"), "--disk", dir.Path("c.img") + ",ro",
         "--queues", "3", "--engine", "sync", "--ring-size", "64"});
    ASSERT_TRUE(first.ok()) << first.mount_result().Describe();
    ASSERT_TRUE(second.ok()) << second.mount_result().Describe();
    first_mountpoint = first.mountpoint();
    second_mountpoint = second.mountpoint();

    JsonValue list = ListJson();
    const JsonValue* one = Listed(list, first.mountpoint());
    const JsonValue* two = Listed(list, second.mountpoint());
    ASSERT_NE(one, nullptr) << "first mount not listed";
    ASSERT_NE(two, nullptr) << "second mount not listed";
    EXPECT_EQ(one->Find("daemon_pid")->unsigned_value,
              static_cast<uint64_t>(first.daemon_pid()));
    EXPECT_EQ(two->Find("daemon_pid")->unsigned_value,
              static_cast<uint64_t>(second.daemon_pid()));

    ASSERT_EQ(one->Find("disks")->array.size(), 1u);
    const JsonValue& a = one->Find("disks")->array[0];
    EXPECT_EQ(a.Find("name")->string, "a.img");
    EXPECT_EQ(a.Find("image")->string, dir.Path("a.img"));
    EXPECT_EQ(a.Find("size")->unsigned_value, 4 * kMiB);
    ASSERT_EQ(two->Find("disks")->array.size(), 2u);
    const JsonValue& c = two->Find("disks")->array[1];
    EXPECT_EQ(c.Find("name")->string, "c.img");
    EXPECT_EQ(c.Find("size")->unsigned_value, 12 * kMiB);
    EXPECT_EQ(c.Find("read_only")->type, JsonValue::Type::kBool);
    EXPECT_TRUE(c.Find("read_only")->boolean);

    // Flags that differ from the defaults; defaults given explicitly
    // (--ring-size 64 is not one) would not show.
    EXPECT_TRUE(HasFlag(*two, "--queues=3"));
    EXPECT_TRUE(HasFlag(*two, "--engine=sync"));
    EXPECT_FALSE(HasFlag(*one, "--queues=3"));
    for (const JsonValue& flag : one->Find("flags")->array) {
      EXPECT_EQ(flag.string.rfind("--fuse-io=", 0), 0u)
          << "the first mount has only the suite's --fuse-io: " << flag.string;
    }

    CommandResult text = RunPvdisk({"list"});
    ASSERT_EQ(text.exit_code, 0) << text.Describe();
    EXPECT_NE(text.out.find(first.mountpoint() + "  daemon pid " +
                            std::to_string(first.daemon_pid())),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("--queues=3"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("c.img  12 MiB  read-only"), std::string::npos)
        << text.out;

    EXPECT_EQ(first.Unmount().exit_code, 0);
    EXPECT_EQ(second.Unmount().exit_code, 0);
  }
  JsonValue after = ListJson();
  EXPECT_EQ(Listed(after, first_mountpoint), nullptr);
  EXPECT_EQ(Listed(after, second_mountpoint), nullptr);
  CommandResult text = RunPvdisk({"list"});
  EXPECT_EQ(text.out.find(first_mountpoint), std::string::npos) << text.out;
}

// A daemon that gives no answer (stopped here, as a hung one would be):
// `pvdisk list` still lists every mount and names the problem, and `pvdisk
// stat` fails with one line, both after the daemon's answer timeout instead
// of waiting for it forever.
TEST(ListCommandTest, AStoppedDaemonIsReportedNotWaitedFor) {
  PVDISK_REQUIRE_FUSE();
  TempDir dir;
  CreateImage(dir.Path("a.img"), 4 * kMiB);
  Mount mount(dir.MakeDir("mnt"), {"--disk", dir.Path("a.img")});
  ASSERT_TRUE(mount.ok()) << mount.mount_result().Describe();
  ASSERT_EQ(kill(mount.daemon_pid(), SIGSTOP), 0) << std::strerror(errno);
  // Runs again before the mount is unmounted, whatever fails below.
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{mount.daemon_pid()};

  JsonValue list = ListJson();
  const JsonValue* listed = Listed(list, mount.mountpoint());
  ASSERT_NE(listed, nullptr) << "stopped mount not listed";
  ASSERT_NE(listed->Find("problem"), nullptr) << "no problem reported";
  EXPECT_NE(listed->Find("problem")->string.find("did not answer"),
            std::string::npos)
      << listed->Find("problem")->string;
  EXPECT_TRUE(listed->Find("disks")->array.empty());

  CommandResult stat = RunPvdisk({"stat", mount.mountpoint(), "--count", "1"});
  EXPECT_EQ(stat.exit_code, 1) << stat.Describe();
  EXPECT_NE(stat.err.find("did not answer"), std::string::npos)
      << stat.Describe();

  ASSERT_EQ(kill(mount.daemon_pid(), SIGCONT), 0) << std::strerror(errno);
  // Once it runs again it answers, and the mount is listed with its disk.
  JsonValue again = ListJson();
  const JsonValue* relisted = Listed(again, mount.mountpoint());
  ASSERT_NE(relisted, nullptr);
  EXPECT_EQ(relisted->Find("disks")->array.size(), 1u);
  EXPECT_EQ(mount.Unmount().exit_code, 0);
}

TEST(ListCommandTest, BadInputIsRefusedWithOneLine) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"list", "extra"},
                                             {"list", "--json=1"},
                                             {"list", "--bogus"},
                                             {"list", "-j"}}) {
    SCOPED_TRACE(::testing::PrintToString(args));
    ExpectUsageError(RunPvdisk(args));
  }
}

}  // namespace
}  // namespace pvdisk::fuse_testing
