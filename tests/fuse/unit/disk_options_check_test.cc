// CheckDiskOptions (fuse/disk_options_check.h): the backend and engine
// settings of a mount against each other and its disks, without a mount.
#include "fuse/disk_options_check.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pvdisk::fuse {
namespace {

std::string ErrorOf(const DiskOptions& options, const DiskOptionFlags& given,
                    const std::vector<DiskSpec>& disks = {}) {
  absl::Status checked = CheckDiskOptions(options, given, disks);
  EXPECT_TRUE(absl::IsInvalidArgument(checked)) << checked;
  return std::string(checked.message());
}

DiskSpec RbdDisk() {
  DiskSpec spec;
  spec.path = "rbd:pool/image";
  spec.rbd = io::RbdSpec{};
  spec.rbd->pool = "pool";
  spec.rbd->image = "image";
  return spec;
}

TEST(CheckDiskOptionsTest, DefaultsPass) {
  EXPECT_TRUE(CheckDiskOptions({}, {}, {DiskSpec{}, RbdDisk()}).ok());
}

TEST(CheckDiskOptionsTest, IrqInlineGivenIsRefusedInABackendProcess) {
  DiskOptions options;
  options.backend = BackendMode::kProcess;
  options.transport.queue.irq = transport::InterruptMode::kInline;
  DiskOptionFlags given;
  given.irq = true;
  EXPECT_EQ(ErrorOf(options, given),
            "--irq inline runs the frontend's interrupt handler on the "
            "backend thread, which --backend process puts in another "
            "process: use --irq thread (the default with --backend process)");
  // Left out, the process's default applies; --irq thread is what it uses.
  EXPECT_TRUE(CheckDiskOptions(options, {}, {}).ok());
  options.transport.queue.irq = transport::InterruptMode::kThread;
  EXPECT_TRUE(CheckDiskOptions(options, given, {}).ok());
  // With backend threads --irq inline is the default.
  options.backend = BackendMode::kThread;
  options.transport.queue.irq = transport::InterruptMode::kInline;
  EXPECT_TRUE(CheckDiskOptions(options, given, {}).ok());
}

TEST(CheckDiskOptionsTest, RestartLimitNeedsABackendProcess) {
  DiskOptionFlags given;
  given.backend_restart_limit = true;
  EXPECT_EQ(ErrorOf({}, given),
            "--backend-restart-limit applies to --backend process only");
  DiskOptions process;
  process.backend = BackendMode::kProcess;
  EXPECT_TRUE(CheckDiskOptions(process, given, {}).ok());
}

TEST(CheckDiskOptionsTest, AnRbdDiskTakesNoOtherEngine) {
  DiskOptions options;
  options.engine = io::EngineKind::kSync;
  EXPECT_TRUE(CheckDiskOptions(options, {}, {DiskSpec{}}).ok());
  EXPECT_EQ(ErrorOf(options, {}, {DiskSpec{}, RbdDisk()}),
            "--engine sync applies to image files; rbd:pool/image is always "
            "served by the rbd engine (leave --engine out, or serve it in a "
            "mount of its own)");
}

TEST(CheckDiskSpecTest, SizeAndEioRangeFitTheImage) {
  constexpr uint64_t kBytes = 1 << 20;  // 2048 sectors
  DiskSpec spec;
  spec.arg = "a.img,size=2M";
  spec.expected_size = 2 << 20;
  absl::Status checked = CheckDiskSpec(spec, kBytes);
  EXPECT_TRUE(absl::IsInvalidArgument(checked)) << checked;
  EXPECT_EQ(checked.message(),
            "--disk a.img,size=2M: the image has 1048576 bytes, not 2 MiB");
  spec.expected_size = kBytes;
  EXPECT_TRUE(CheckDiskSpec(spec, kBytes).ok());

  spec = DiskSpec{};
  spec.arg = "a.img,eio=2040+9";
  spec.fault = io::FaultRange{2040, 9};
  checked = CheckDiskSpec(spec, kBytes);
  EXPECT_TRUE(absl::IsInvalidArgument(checked)) << checked;
  EXPECT_EQ(checked.message(),
            "--disk a.img,eio=2040+9: the eio range 2040+9 does not fit in "
            "the image's 2048 sectors");
  spec.fault = io::FaultRange{2040, 8};  // the last 8 sectors
  EXPECT_TRUE(CheckDiskSpec(spec, kBytes).ok());
  spec.fault = io::FaultRange{2048, 1};
  EXPECT_FALSE(CheckDiskSpec(spec, kBytes).ok());
}

}  // namespace
}  // namespace pvdisk::fuse

namespace pvdisk::fuse {
namespace {

FlagValues Given(std::map<std::string, std::string, std::less<>> values) {
  return FlagValues(std::move(values));
}

std::string FlagErrorOf(std::map<std::string, std::string, std::less<>> values,
                        const std::vector<DiskSpec>& disks = {}) {
  absl::StatusOr<DiskOptions> read =
      DiskOptionsFromFlags(Given(std::move(values)), {}, disks);
  EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
  return std::string(read.status().message());
}

TEST(DiskOptionsFromFlagsTest, NoFlagsGiveTheDefaultsOverTheTransport) {
  transport::TransportOptions transport;
  transport.queues = 4;
  absl::StatusOr<DiskOptions> read =
      DiskOptionsFromFlags(Given({}), transport, {});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->transport.queues, 4u);
  EXPECT_EQ(read->engine, io::EngineKind::kUring);
  EXPECT_EQ(read->backend, BackendMode::kThread);
  EXPECT_EQ(read->backend_restart_limit,
            transport::process::kDefaultRestartLimit);
  EXPECT_EQ(read->shutdown_timeout_seconds, kDefaultShutdownTimeoutSeconds);
}

TEST(DiskOptionsFromFlagsTest, BackendIsThreadOrProcess) {
  EXPECT_EQ(FlagErrorOf({{"backend", "fork"}}),
            "--backend 'fork' is not allowed: use thread or process");
  absl::StatusOr<DiskOptions> read = DiskOptionsFromFlags(
      Given({{"backend", "process"}, {"backend-restart-limit", "7"}}), {}, {});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->backend, BackendMode::kProcess);
  EXPECT_EQ(read->backend_restart_limit, 7u);
}

TEST(DiskOptionsFromFlagsTest, RestartLimitAndShutdownTimeoutHaveTheirRanges) {
  EXPECT_EQ(
      FlagErrorOf({{"backend", "process"}, {"backend-restart-limit", "1001"}}),
      "--backend-restart-limit '1001' is not allowed: use a whole number "
      "from 0 to 1000");
  EXPECT_EQ(FlagErrorOf({{"shutdown-timeout", "0"}}),
            "--shutdown-timeout '0' is not allowed: use a whole number from 1 "
            "to 86400");
  EXPECT_EQ(FlagErrorOf({{"shutdown-timeout", "86401"}}),
            "--shutdown-timeout '86401' is not allowed: use a whole number "
            "from 1 to 86400");
}

TEST(DiskOptionsFromFlagsTest, AnUnknownEngineIsRefused) {
  EXPECT_EQ(FlagErrorOf({{"engine", "foo"}}),
            "unknown engine 'foo'; allowed: uring, sync, null");
}

TEST(DiskOptionsFromFlagsTest, TheOptionsAreCheckedAgainstEachOther) {
  // CheckDiskOptions' rules, reached through the flags.
  EXPECT_EQ(FlagErrorOf({{"backend-restart-limit", "3"}}),
            "--backend-restart-limit applies to --backend process only");
  EXPECT_NE(
      FlagErrorOf({{"engine", "sync"}}, {RbdDisk()}).find("--engine sync"),
      std::string::npos);
}

TEST(PayloadsInPlaceTest, NeedPersistentGrantsAndBackendThreads) {
  DiskOptions options;
  EXPECT_TRUE(PayloadsInPlace(options));
  options.transport.queue.persistent = false;
  EXPECT_FALSE(PayloadsInPlace(options));
  options.transport.queue.persistent = true;
  options.backend = BackendMode::kProcess;
  EXPECT_FALSE(PayloadsInPlace(options));
}

}  // namespace
}  // namespace pvdisk::fuse
