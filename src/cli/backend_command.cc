// `pvdisk __backend LABEL`: the backend process of one disk, started by the
// daemon with --backend process (see transport/process/backend_supervisor.h),
// never by hand. Its socket to the daemon is descriptor 3. It opens no image
// file by name: the daemon sends its open image file(s) with the setup, and
// this process opens each again through /proc/self/fd, which yields the same
// inode whatever became of the path since the daemon opened it. An RBD image
// has no files: this process connects to its cluster and opens it by name,
// from the spec as the daemon resolved it, and checks it is the image the
// daemon opened (its librbd id).
//
// A disk's volatile write cache (cache=volatile) and write log (log=FILE)
// live here, where its I/O is done: made with the engines, reached by the
// daemon through control requests (fuse/disk_backend_control.h). The log's
// file comes from the daemon, which made it and publishes it.
#include <fcntl.h>

#include <memory>
#include <string>
#include <vector>

#include "base/errno_status.h"
#include "base/status_macros.h"
#include "cli/commands.h"
#include "cli/disk_arg.h"
#include "fuse/disk.h"
#include "fuse/disk_backend_control.h"
#include "image/image.h"
#include "image/open_image.h"
#include "transport/process/backend_host.h"
#include "transport/process/io_fence.h"

namespace pvdisk::cli {
namespace {

constexpr int kDaemonSocketFd = 3;

// The backend's engines serve the image rebuilt from the daemon's files
// (image::OpenImageFromFiles): this process's own opens of them.
//
// The image lock (io/image_lock.h) is held on these opens too, not only by
// the daemon's: OFD locks last as long as the open file description, and
// this open outlives this process while its io_uring still has I/O in
// flight. Were only the daemon's open locked, a daemon killed with SIGKILL
// would free the image at once while its killed backend's writes still
// land, and a QEMU or another mount taking the image then would have its
// data undone. With the lock on this open too the image stays locked until
// the last write of either process is done (what a --backend thread daemon
// gets from its own io_uring). On a clean stop the locks are dropped as soon
// as the loops have answered everything (the image goes with the last
// engine factory, and Image::Release with it), so that the image is free
// when unmount returns.
absl::StatusOr<transport::process::BackendEngines> MakeEngineFactory(
    const transport::process::BackendSetup& setup,
    const std::vector<int>& image_fds, const std::vector<int>& other_fds) {
  PVDISK_ASSIGN_OR_RETURN(fuse::EngineConfig config,
                          fuse::DecodeEngineConfig(setup.engine_config));
  // The options of the --disk argument; its path only names the image in
  // messages.
  PVDISK_ASSIGN_OR_RETURN(fuse::DiskSpec spec, ParseDiskArg(config.disk_arg));
  if (config.rbd) spec.rbd = config.rbd;
  PVDISK_ASSIGN_OR_RETURN(
      std::shared_ptr<image::Image> image,
      image::OpenSameImage(fuse::ImageSpecOf(spec, config.engine), image_fds,
                           config.identity));
  // Held by this open of the image's first file until its last I/O is done.
  // An RBD image has none: librbd's exclusive lock fences it (see
  // image/rbd_volume.h).
  if (!image->files().empty()) {
    PVDISK_RETURN_IF_ERROR(
        transport::process::HoldFence(image->files()[0], setup.fence_byte));
  }
  std::shared_ptr<io::VolatileCache> cache;
  if (spec.cache_volatile) {
    PVDISK_ASSIGN_OR_RETURN(cache, fuse::MakeVolatileCache(spec, *image));
  }
  std::shared_ptr<io::WriteLog> log;
  if (!spec.log_path.empty()) {
    if (other_fds.size() != 1) {
      return absl::DataLossError(
          "the setup packet carries no file for the disk's write log");
    }
    // Our own descriptor of the daemon's open file: `other_fds` are closed
    // when this returns.
    const int fd = fcntl(other_fds[0], F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return ErrnoError(errno, "dup of the write log's file");
    PVDISK_ASSIGN_OR_RETURN(log, io::WriteLog::Adopt(fd, spec.log_path));
  }
  // The factory keeps the image open (and locked) for the engines it makes.
  transport::process::BackendEngines engines;
  engines.writer = image->writer();
  if (cache || log) {
    auto control =
        std::make_shared<fuse::DiskBackendControl>(image, cache, log);
    engines.control = [control](std::string_view request) {
      return control->Handle(request);
    };
    engines.stopped = [control] { control->Stopped(); };
  }
  engines.factory = fuse::EngineFactoryFor(spec, std::move(image),
                                           std::move(cache), std::move(log));
  return engines;
}

}  // namespace

int RunBackend(const std::vector<std::string>& args) {
  (void)args;  // the label only shows in ps
  return transport::process::RunBackendHost(kDaemonSocketFd, MakeEngineFactory);
}

}  // namespace pvdisk::cli
