// `pvdisk __backend LABEL`: the backend process of one disk, started by the
// daemon with --backend process (see transport/process/backend_supervisor.h),
// never by hand. Its socket to the daemon is descriptor 3. It opens no image
// by name: the daemon sends its open image file(s) with the setup, and this
// process opens each again through /proc/self/fd, which yields the same
// inode whatever became of the path since the daemon opened it.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "cli/commands.h"
#include "cli/disk_arg.h"
#include "fuse/disk.h"
#include "io/image_file.h"
#include "io/image_lock.h"
#include "transport/process/backend_host.h"
#include "transport/process/io_fence.h"

namespace pvdisk::cli {
namespace {

constexpr int kDaemonSocketFd = 3;

// This process's open of the image and the locks it holds on it.
//
// The image lock (io/image_lock.h) is held here too, not only by the
// daemon: OFD locks last as long as the open file description, and this
// open outlives this process while its io_uring still has I/O in flight.
// Were only the daemon's open locked, a daemon killed with SIGKILL would
// free the image at once while its killed backend's writes still land, and
// a QEMU or another mount taking the image then would have its data undone.
// With the lock on this open too the image stays locked until the last
// write of either process is done (what a --backend thread daemon gets from
// its own io_uring). On a clean stop the locks are dropped as soon as the
// loops have answered everything, so that the image is free when unmount
// returns.
struct OpenedImage {
  std::unique_ptr<io::ImageFile> file;
  bool locked = false;
  ~OpenedImage() {
    if (locked) io::UnlockImage(file->fd());
  }
};

absl::StatusOr<transport::EngineFactory> MakeEngineFactory(
    const transport::process::BackendSetup& setup,
    const std::vector<int>& image_fds) {
  PVDISK_ASSIGN_OR_RETURN(fuse::EngineConfig config,
                          fuse::DecodeEngineConfig(setup.engine_config));
  // The options of the --disk argument; its path only names the image in
  // messages.
  PVDISK_ASSIGN_OR_RETURN(fuse::DiskSpec spec, ParseDiskArg(config.disk_arg));
  if (image_fds.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", spec.path, " is a raw image of one file; ",
                     image_fds.size(), " were sent"));
  }
  auto image = std::make_shared<OpenedImage>();
  // An open of our own: for the fence and the locks (which belong to an
  // open file description), and with O_DIRECT as the engine wants it.
  PVDISK_ASSIGN_OR_RETURN(
      image->file,
      io::ImageFile::Reopen(image_fds[0], spec.path, spec.read_only,
                            fuse::EngineWantsDirect(config.engine)));
  if (spec.lock) {
    PVDISK_RETURN_IF_ERROR(
        io::JoinImageLock(image->file->fd(), spec.path, spec.read_only));
    image->locked = true;
  }
  // Held by this open of the image until its last I/O is done.
  PVDISK_RETURN_IF_ERROR(
      transport::process::HoldFence(image->file->fd(), setup.fence_byte));
  // The factory keeps the image open (and locked) for the engines it makes.
  transport::EngineFactory make =
      fuse::EngineFactoryFor(spec, config.engine, image->file.get());
  return transport::EngineFactory(
      [image, make](uint32_t depth, io::RingLender* lender) {
        return make(depth, lender);
      });
}

}  // namespace

int RunBackend(const std::vector<std::string>& args) {
  (void)args;  // the label only shows in ps
  return transport::process::RunBackendHost(kDaemonSocketFd, MakeEngineFactory);
}

}  // namespace pvdisk::cli
