// What the qcow2 mount tests share: shell commands that must succeed, and
// QEMU's tools (qemu-img, qemu-io) as the independent judge of an image.
#pragma once

#include <unistd.h>

#include <chrono>
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

}  // namespace pvdisk::fuse_testing

// Skips a test without /dev/fuse or without QEMU's tools.
#define PVDISK_REQUIRE_QEMU()                                              \
  do {                                                                     \
    PVDISK_REQUIRE_FUSE();                                                 \
    if (std::string why = ::pvdisk::fuse_testing::QemuUnavailableReason(); \
        !why.empty())                                                      \
      GTEST_SKIP() << why;                                                 \
  } while (0)
