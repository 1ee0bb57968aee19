// What the qcow2 mount tests share: shell commands that must succeed,
// QEMU's tools (qemu-img, qemu-io) as the independent judge of an image,
// and the small tools of hand-built hostile images.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {

// Runs a shell command line (two minutes at most).
inline CommandResult Sh(const std::string& line) {
  return RunCommand({"sh", "-c", line}, std::chrono::seconds(120));
}

// Runs a shell command line; fails the test unless it exits 0.
inline void ShOk(const std::string& line) {
  CommandResult r = Sh(line);
  ASSERT_EQ(r.exit_code, 0) << line << "\n" << r.Describe();
}

// Empty when qemu-img and qemu-io are there, else why not.
inline std::string QemuUnavailableReason() {
  if (Sh("command -v qemu-img && command -v qemu-io").exit_code != 0) {
    return "qemu-img and qemu-io (qemu-utils) are not installed";
  }
  return "";
}

// The disk as QEMU reads it (-U: a mount holds the image's lock).
inline std::string QemuRaw(const TempDir& dir, const std::string& image) {
  const std::string raw = dir.Path("judge.raw");
  ShOk("qemu-img convert -U -O raw '" + image + "' '" + raw + "'");
  std::string bytes = ReadWholeFile(raw);
  unlink(raw.c_str());
  return bytes;
}

// Internal snapshot `name` of the image as QEMU reads it.
inline std::string SnapshotRaw(const TempDir& dir, const std::string& image,
                               const std::string& name) {
  const std::string raw = dir.Path("snap.raw");
  ShOk("qemu-img convert -U -l snapshot.name=" + name + " -O raw '" + image +
       "' '" + raw + "'");
  std::string bytes = ReadWholeFile(raw);
  unlink(raw.c_str());
  return bytes;
}

// The image's snapshots s1 and s2 as QEMU reads them, taken before pvdisk
// writes; ExpectCheckedAndSnapshotsKept compares them afterwards.
struct TwoSnapshots {
  std::string s1;
  std::string s2;
};
inline TwoSnapshots SnapshotsBefore(const TempDir& dir,
                                    const std::string& image) {
  return {SnapshotRaw(dir, image, "s1"), SnapshotRaw(dir, image, "s2")};
}
// `qemu-img check` finds the image clean, and neither snapshot changed.
inline void ExpectCheckedAndSnapshotsKept(const TempDir& dir,
                                          const std::string& image,
                                          const TwoSnapshots& before) {
  ShOk("qemu-img check '" + image + "'");
  EXPECT_EQ(FirstDifference(before.s1, SnapshotRaw(dir, image, "s1")), "")
      << "snapshot s1";
  EXPECT_EQ(FirstDifference(before.s2, SnapshotRaw(dir, image, "s2")), "")
      << "snapshot s2";
}

// The big-endian 64-bit field at `at` of an image's bytes, read and set.
inline uint64_t Be64(const std::string& s, uint64_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}
inline void PutBe64(std::string& s, uint64_t at, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) s[at + i] = static_cast<char>(v);
}

// Reads `length` bytes at `offset` with O_DIRECT (no readahead reaches
// the neighbours): the errno, or 0.
inline int DirectReadErrno(const std::string& path, uint64_t offset,
                           uint64_t length) {
  Fd fd = Open(path, O_RDONLY | O_DIRECT);
  if (!fd.valid()) return errno;
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, length) != 0) return ENOMEM;
  const ssize_t n = pread(fd.get(), buf, length, static_cast<off_t>(offset));
  const int error = n < 0 ? errno : 0;
  free(buf);
  return n == static_cast<ssize_t>(length) || n < 0 ? error : EIO;
}

// Kills the mount's daemon with SIGKILL while `load` writes through it,
// waits for the load to end and the daemon to be gone, then takes the
// mount down (the crash the kill tests judge afterwards).
inline void KillDaemonUnderLoad(Mount& mount, BackgroundProcess& load) {
  ASSERT_EQ(kill(mount.daemon_pid(), SIGKILL), 0) << std::strerror(errno);
  load.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(WaitUntil([&] { return !PvdiskProcessAlive(mount.daemon_pid()); },
                        std::chrono::seconds(10)));
  mount.Unmount(std::chrono::seconds(30));
}

}  // namespace pvdisk::fuse_testing

// Skips a test without /dev/fuse or without QEMU's tools.
#define PVDISK_REQUIRE_QEMU()                                              \
  do {                                                                     \
    PVDISK_REQUIRE_FUSE();                                                 \
    if (std::string why = ::pvdisk::fuse_testing::QemuUnavailableReason(); \
        !why.empty())                                                      \
      GTEST_SKIP() << why;                                                 \
  } while (0)
