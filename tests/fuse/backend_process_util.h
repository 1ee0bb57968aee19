// What the --backend process tests share: the backend's pid and state from
// the stats header, and killing the backend and waiting for the next one.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {

inline constexpr auto kBackendRestartTimeout = std::chrono::seconds(30);

// The backend process of disk `name`, from the stats header (-1 if none).
inline pid_t BackendPid(const std::string& mountpoint,
                        const std::string& name) {
  DiskStats stats = StatsOf(mountpoint, name);
  return static_cast<pid_t>(std::stol(stats.config["backend_pid"]));
}

inline std::string BackendState(const std::string& mountpoint,
                                const std::string& name) {
  return StatsOf(mountpoint, name).config["backend_state"];
}

// Kills the running backend with SIGKILL and waits until a new one serves
// the disk; returns false (after failing the test) if none came.
inline bool KillBackendAndWaitForNew(const std::string& mountpoint,
                                     const std::string& name) {
  pid_t old_pid = BackendPid(mountpoint, name);
  EXPECT_GT(old_pid, 0);
  if (old_pid <= 0) return false;
  EXPECT_EQ(kill(old_pid, SIGKILL), 0) << std::strerror(errno);
  bool restarted = WaitUntil(
      [&] {
        pid_t pid = BackendPid(mountpoint, name);
        return pid > 0 && pid != old_pid &&
               BackendState(mountpoint, name) == "running";
      },
      kBackendRestartTimeout);
  EXPECT_TRUE(restarted) << "no new backend after killing " << old_pid
                         << " (backend_state " << BackendState(mountpoint, name)
                         << ")";
  return restarted;
}

// Whether process `pid` is gone (reaped if it was ours).
inline bool ProcessGone(pid_t pid) {
  if (PvdiskProcessAlive(pid)) return false;
  waitpid(pid, nullptr, WNOHANG);
  return true;
}

}  // namespace pvdisk::fuse_testing
