// `pvdisk __backend LABEL`: the backend process of one disk, started by the
// daemon with --backend process (see transport/process/backend_supervisor.h),
// never by hand. Its socket to the daemon is descriptor 3. It opens no image
// file by name: the daemon sends its open image file(s) with the setup, and
// this process opens each again through /proc/self/fd, which yields the same
// inode whatever became of the path since the daemon opened it. An RBD image
// has no files: this process connects to its cluster and opens it by name,
// from the spec as the daemon resolved it, and checks it is the image the
// daemon opened (its librbd id).
#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "cli/commands.h"
#include "cli/disk_arg.h"
#include "fuse/disk.h"
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
    const std::vector<int>& image_fds) {
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
  // The factory keeps the image open (and locked) for the engines it makes.
  transport::process::BackendEngines engines;
  engines.writer = image->writer();
  engines.factory = fuse::EngineFactoryFor(spec, std::move(image));
  return engines;
}

}  // namespace

int RunBackend(const std::vector<std::string>& args) {
  (void)args;  // the label only shows in ps
  return transport::process::RunBackendHost(kDaemonSocketFd, MakeEngineFactory);
}

}  // namespace pvdisk::cli
