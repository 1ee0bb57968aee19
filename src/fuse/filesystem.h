// Filesystem: the FUSE server. A flat directory holds one regular file per
// disk (named after its image, of exactly the image's size), plus `stats`
// (a text table; writing "reset" zeroes the counters), `stats.json` and
// `metrics` (the Prometheus text format): three renderings of one snapshot;
// the hidden `.trace` control file of `pvdisk trace` (not listed:
// trace/trace_control.h); and the hidden `.control` file of `pvdisk attach`
// and `pvdisk detach` (disk_control.h), which change the disks while the
// mount serves (disk_set.h).
//
// READ, WRITE, FSYNC and FALLOCATE on a disk become BlockIos on its queue;
// the handler returns at once and the reply is sent by whichever thread
// takes the queue's interrupt (the backend's, or a completion thread). Disk
// files are opened with direct_io, so the page cache is never involved.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuse/disk.h"
#include "fuse/disk_control.h"
#include "fuse/disk_io.h"
#include "fuse/disk_set.h"
#include "fuse/fuse_channel_options.h"
#include "fuse/inline_driver.h"
#include "stats/stats_command.h"
#include "trace/trace_control.h"

namespace pvdisk::fuse {

// What `pvdisk attach` needs of the mount command: opens and starts the disk
// that the attach's words (those after MOUNTPOINT) ask for, with the
// mount's settings where the words give none, after the checks a mount
// makes (the image, its lock, permissions, format, and the memory budget,
// counting the `attached` disks). Errors are one line.
using DiskOpener = std::function<absl::StatusOr<std::unique_ptr<Disk>>(
    const std::vector<std::string>& words,
    const std::vector<const Disk*>& attached)>;

class Filesystem {
 public:
  // Takes the disks, which must have been started. Does not mount.
  // `allow_other`: let other users than the mounting one reach the mount
  // (the kernel checks each file's owner and mode either way:
  // default_permissions). `channel`: the FUSE channel, as checked
  // (fuse_channel_options.h) and resolved.
  // `open_disk`: how attach opens a disk (null: attach is refused).
  explicit Filesystem(std::vector<std::unique_ptr<Disk>> disks,
                      bool allow_other = false,
                      const FuseChannelOptions& channel = {},
                      DiskOpener open_disk = nullptr);
  ~Filesystem();

  // Mounts at `mountpoint` and serves requests until the filesystem is
  // unmounted or the process gets SIGINT, SIGTERM or SIGHUP. Calls
  // `on_mounted` once the mount exists. Then finishes every request in
  // flight, makes the disks durable, and unmounts. Errors before the mount
  // exists are returned and leave nothing mounted.
  absl::Status MountAndServe(const std::string& mountpoint,
                             const std::function<void()>& on_mounted);

  // The stats files' contents (text table, JSON, Prometheus text).
  std::string StatsText() const;
  std::string StatsJson() const;
  std::string MetricsText() const;
  void ResetStats();
  // `pvdisk powercut`'s command (Disk::PowerCut): 0, or -ENOENT (no disk
  // of that name), -EINVAL (the disk has no cache=volatile), -EALREADY
  // (cut already), -EIO (the kept writes could not be written).
  int PowerCut(const stats::StatsRequest& request);
  // A mark's command (Disk::Mark) for the disk it names, or for every disk
  // with a write log when it names none: 0, or -ENOENT (no disk of that
  // name), -EINVAL (no write log there, or a name a mark cannot have),
  // -EIO (the log cannot be written).
  int Mark(const stats::StatsRequest& request);

  // Whether a disk's shutdown gave up on I/O in flight (Disk::Shutdown):
  // then the process must end (_exit) without destroying the Filesystem's
  // caller's memory that engines may still write into.
  bool abandoned_io() const;

  // `pvdisk attach`: opens the disk `words` ask for and adds it.
  absl::Status Attach(const std::vector<std::string>& words);
  // `pvdisk detach`: takes the disk out (DiskSet::Remove), then drains it
  // (Disk::Shutdown: I/O in flight finishes, writes are made durable, the
  // image and its lock are released).
  absl::Status Detach(const std::string& name, bool force);
  // Runs a control file's command on the control thread; `done` gets its
  // status there.
  void RunControl(ControlRequest request,
                  std::function<void(absl::Status)> done);

  DiskSet& disks() { return disks_; }
  trace::TraceControl& trace_control() { return trace_control_; }

 private:
  // Every disk's counters, taken now: what the stats files render.
  std::vector<stats::DiskReport> Reports() const;

  DiskSet disks_;
  const DiskOpener open_disk_;
  // A detached disk's shutdown gave up on I/O in flight (abandoned_io()).
  std::atomic<bool> detached_abandoned_{false};
  // The FUSE queue threads' drivers of the inline placement (the serve's
  // companions), which a detach of an inline disk asks to let it go.
  InlineDrivers inline_drivers_;
  // Made at the first command; stopped before the disks shut down.
  std::mutex control_mu_;
  std::unique_ptr<ControlWorker> control_;
  void StopControl();
  const bool allow_other_;
  const FuseChannelOptions channel_;
  // When the counters started (mount or the last reset), on
  // stats::MonotonicNanos()'s clock, for stats.json's "since_ns".
  std::atomic<uint64_t> stats_since_ns_;
  // After the disks: it goes first, turning their traces off.
  trace::TraceControl trace_control_;
};

}  // namespace pvdisk::fuse
