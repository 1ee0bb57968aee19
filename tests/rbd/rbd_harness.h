// Helpers of the RBD tests: the test cluster's ceph.conf, a cluster of the
// test's own, and RBD images made, read back and removed with the `rbd` CLI
// (librbd, independent of pvdisk).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuse_harness.h"

namespace pvdisk::rbd_testing {

// The shared test cluster's ceph.conf ($PVDISK_TEST_CEPH_CONF, set by ctest's
// rbd_cluster fixture), or "" when the tests run without one.
std::string SharedClusterConf();

// A cluster started with `scripts/ceph-cluster.sh start` in a fresh folder,
// stopped (and the folder removed) on destruction unless Stop() did it.
class OwnCluster {
 public:
  OwnCluster();
  ~OwnCluster();
  OwnCluster(const OwnCluster&) = delete;
  OwnCluster& operator=(const OwnCluster&) = delete;

  bool ok() const { return !conf_.empty(); }
  const std::string& conf() const { return conf_; }
  const std::string& start_output() const { return start_output_; }
  // Stops the daemons and removes the folder; true on success.
  bool Stop();
  // Freezes (SIGSTOP) or thaws (SIGCONT) the OSD: a cluster that hangs
  // without closing its connections, unlike Stop(). True if the signal
  // reached it. Stop() thaws it first.
  bool FreezeOsd(bool frozen);
  // Sets or clears the cluster's `pause` flag (`ceph osd set|unset pause`):
  // clients then hold every read and write instead of sending it, as they
  // hold writes to a full cluster, and nothing answers them. True on
  // success.
  bool PauseIo(bool paused);

 private:
  std::string dir_;
  std::string conf_;
  std::string start_output_;
  bool stopped_ = false;
};

// A name no other test uses: PREFIX-PID-COUNTER.
std::string UniqueImageName(const std::string& prefix);

// `rbd create rbd/NAME --size BYTES` on the cluster of `conf`; fails the test
// on error.
void CreateRbdImage(const std::string& conf, const std::string& name,
                    uint64_t size_bytes);
// `rbd -c CONF ARGS...`, bounded to a minute.
fuse_testing::CommandResult RunRbd(const std::string& conf,
                                   const std::vector<std::string>& args);
// `rbd rm rbd/NAME` (errors ignored: the image may be gone with its cluster).
void RemoveRbdImage(const std::string& conf, const std::string& name);
// The image's bytes through `rbd export`; nullopt (and a test failure) on
// error.
std::optional<std::string> ExportRbdImage(const std::string& conf,
                                          const std::string& name);

}  // namespace pvdisk::rbd_testing
