#include "rbd_harness.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fuse_harness.h"
#include "gtest/gtest.h"

namespace pvdisk::rbd_testing {
namespace {

using fuse_testing::CommandResult;
using fuse_testing::RunCommand;

// The last non-empty line of `text`.
std::string LastLine(const std::string& text) {
  std::string line, last;
  std::istringstream lines(text);
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace

std::string SharedClusterConf() {
  const char* conf = std::getenv("PVDISK_TEST_CEPH_CONF");
  return conf == nullptr ? "" : conf;
}

OwnCluster::OwnCluster() {
  char pattern[] = "/tmp/pvdisk_rbd_cluster.XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return;
  }
  dir_ = pattern;
  CommandResult start = RunCommand({PVDISK_CEPH_CLUSTER_SCRIPT, "start", dir_},
                                   std::chrono::seconds(180));
  start_output_ = start.Describe();
  if (start.exit_code == 0) conf_ = LastLine(start.out);
}

OwnCluster::~OwnCluster() {
  if (!stopped_ && !dir_.empty()) {
    EXPECT_TRUE(Stop());
  }
}

bool OwnCluster::FreezeOsd(bool frozen) {
  // DIR/pids lists the daemons that start launched; the OSD is the one whose
  // command is ceph-osd.
  std::ifstream pids(dir_ + "/pids");
  bool signalled = false;
  for (pid_t pid; pids >> pid;) {
    std::ifstream comm_file("/proc/" + std::to_string(pid) + "/comm");
    std::string comm;
    if (!(comm_file >> comm) || comm != "ceph-osd") continue;
    signalled |= kill(pid, frozen ? SIGSTOP : SIGCONT) == 0;
  }
  return signalled;
}

bool OwnCluster::PauseIo(bool paused) {
  CommandResult set = RunCommand(
      {"ceph", "-c", conf_, "osd", paused ? "set" : "unset", "pause"},
      std::chrono::seconds(60));
  EXPECT_EQ(set.exit_code, 0) << set.Describe();
  return set.exit_code == 0;
}

bool OwnCluster::Stop() {
  stopped_ = true;
  FreezeOsd(false);  // a frozen OSD would not take stop's SIGTERM
  CommandResult stop = RunCommand({PVDISK_CEPH_CLUSTER_SCRIPT, "stop", dir_},
                                  std::chrono::seconds(60));
  EXPECT_EQ(stop.exit_code, 0) << stop.Describe();
  if (stop.exit_code != 0) {
    // Leave nothing behind even so: the folder was ours.
    RunCommand({"rm", "-rf", dir_});
  }
  return stop.exit_code == 0;
}

std::string UniqueImageName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(getpid()) + "-" +
         std::to_string(counter++);
}

void CreateRbdImage(const std::string& conf, const std::string& name,
                    uint64_t size_bytes) {
  CommandResult create =
      RunCommand({"rbd", "-c", conf, "create", "rbd/" + name, "--size",
                  std::to_string(size_bytes) + "B"},
                 std::chrono::seconds(60));
  ASSERT_EQ(create.exit_code, 0) << create.Describe();
}

CommandResult RunRbd(const std::string& conf,
                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"rbd", "-c", conf};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, std::chrono::seconds(60));
}

void RemoveRbdImage(const std::string& conf, const std::string& name) {
  RunCommand({"rbd", "-c", conf, "--rados-osd-op-timeout", "10", "rm",
              "--no-progress", "rbd/" + name},
             std::chrono::seconds(60));
}

std::optional<std::string> ExportRbdImage(const std::string& conf,
                                          const std::string& name) {
  char pattern[] = "/tmp/pvdisk_rbd_export.XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return std::nullopt;
  }
  const std::string dir = pattern;
  const std::string file = dir + "/image.raw";
  CommandResult exported = RunCommand(
      {"rbd", "-c", conf, "export", "--no-progress", "rbd/" + name, file},
      std::chrono::seconds(120));
  std::optional<std::string> bytes;
  if (exported.exit_code == 0) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream data;
    data << in.rdbuf();
    bytes = data.str();
  } else {
    ADD_FAILURE() << "rbd export failed: " << exported.Describe();
  }
  RunCommand({"rm", "-rf", dir});
  return bytes;
}

}  // namespace pvdisk::rbd_testing
