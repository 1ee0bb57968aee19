// --fuse-io resolution against the fuse module's enable_uring parameter,
// using a scratch file in its place: a kernel without the parameter, one
// with it switched off (turned on when we are root), and one with it on.
#include "fuse/channel/uring_support.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pvdisk::fuse::channel {
namespace {

class ScratchParameter {
 public:
  ScratchParameter() {
    char pattern[] = "/tmp/pvdisk_enable_uring.XXXXXX";
    int fd = mkstemp(pattern);
    EXPECT_GE(fd, 0);
    if (fd >= 0) close(fd);
    path_ = pattern;
  }
  ~ScratchParameter() { unlink(path_.c_str()); }
  void Set(const std::string& value) { std::ofstream(path_) << value << "\n"; }
  std::string Get() const {
    std::ifstream reader(path_);
    std::string value;
    std::getline(reader, value);
    return value;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(UringSupportTest, ParsesTheChoices) {
  EXPECT_EQ(*ParseFuseIo("auto"), FuseIo::kAuto);
  EXPECT_EQ(*ParseFuseIo("uring"), FuseIo::kUring);
  EXPECT_EQ(*ParseFuseIo("classic"), FuseIo::kClassic);
  absl::StatusOr<FuseIo> bad = ParseFuseIo("io_uring");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use auto, uring or classic"),
            std::string::npos);
}

TEST(UringSupportTest,
     AKernelWithoutItGetsClassicUnderAutoAndAnErrorUnderUring) {
  const std::string missing = "/nonexistent/pvdisk/enable_uring";
  std::string note;
  absl::StatusOr<FuseIo> automatic =
      ResolveFuseIo(FuseIo::kAuto, &note, missing);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(*automatic, FuseIo::kClassic);
  EXPECT_TRUE(note.empty());
  absl::StatusOr<FuseIo> uring = ResolveFuseIo(FuseIo::kUring, &note, missing);
  ASSERT_FALSE(uring.ok());
  EXPECT_EQ(uring.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(uring.status().message().find("--fuse-io uring is not possible"),
            std::string::npos);
  EXPECT_NE(uring.status().message().find("CONFIG_FUSE_IO_URING"),
            std::string::npos);
  // classic never looks.
  EXPECT_EQ(*ResolveFuseIo(FuseIo::kClassic, &note, missing), FuseIo::kClassic);
}

TEST(UringSupportTest, SwitchedOffIsTurnedOnByRootAndSaysSo) {
  ScratchParameter parameter;
  parameter.Set("N");
  std::string note;
  absl::StatusOr<FuseIo> resolved =
      ResolveFuseIo(FuseIo::kAuto, &note, parameter.path());
  ASSERT_TRUE(resolved.ok());
  if (geteuid() == 0) {
    EXPECT_EQ(*resolved, FuseIo::kUring);
    EXPECT_EQ(parameter.Get(), "Y");
    EXPECT_NE(note.find("turned on FUSE over io_uring"), std::string::npos);
  } else {
    EXPECT_EQ(*resolved, FuseIo::kClassic);
    EXPECT_EQ(parameter.Get(), "N");
    EXPECT_TRUE(note.empty());
  }
}

TEST(UringSupportTest,
     SwitchedOffWithoutTheRightToTurnItOnIsAnErrorUnderUring) {
  ScratchParameter parameter;
  parameter.Set("N");
  UringSupport support =
      CheckUringSupport(/*may_turn_on=*/false, parameter.path());
  EXPECT_FALSE(support.available);
  EXPECT_FALSE(support.turned_on);
  EXPECT_NE(support.why_not.find("switched off"), std::string::npos);
  EXPECT_EQ(parameter.Get(), "N");
}

TEST(UringSupportTest, SwitchedOnIsUsed) {
  ScratchParameter parameter;
  parameter.Set("Y");
  std::string note;
  EXPECT_EQ(*ResolveFuseIo(FuseIo::kAuto, &note, parameter.path()),
            FuseIo::kUring);
  EXPECT_EQ(*ResolveFuseIo(FuseIo::kUring, &note, parameter.path()),
            FuseIo::kUring);
  EXPECT_TRUE(note.empty());
}

}  // namespace
}  // namespace pvdisk::fuse::channel
