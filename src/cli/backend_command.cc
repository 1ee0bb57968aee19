// `pvdisk __backend LABEL`: the backend process of one disk, started by the
// daemon with --backend process (see transport/process/backend_supervisor.h),
// never by hand. Its socket to the daemon is descriptor 3; it opens the
// image itself, from the --disk argument the daemon sends.
#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "cli/commands.h"
#include "cli/disk_arg.h"
#include "fuse/disk.h"
#include "io/image_file.h"
#include "transport/process/backend_host.h"
#include "transport/process/io_fence.h"

namespace pvdisk::cli {
namespace {

constexpr int kDaemonSocketFd = 3;

absl::StatusOr<transport::EngineFactory> MakeEngineFactory(
    const transport::process::BackendSetup& setup) {
  PVDISK_ASSIGN_OR_RETURN(fuse::EngineConfig config,
                          fuse::DecodeEngineConfig(setup.engine_config));
  PVDISK_ASSIGN_OR_RETURN(fuse::DiskSpec spec, ParseDiskArg(config.disk_arg));
  PVDISK_ASSIGN_OR_RETURN(
      std::unique_ptr<io::ImageFile> opened,
      io::ImageFile::Open(spec.path, spec.read_only,
                          fuse::EngineWantsDirect(config.engine)));
  // Held by this open of the image until its last I/O is done.
  PVDISK_RETURN_IF_ERROR(
      transport::process::HoldFence(opened->fd(), setup.fence_byte));
  // The factory keeps the image open for the engines it makes.
  std::shared_ptr<io::ImageFile> image(std::move(opened));
  transport::EngineFactory make =
      fuse::EngineFactoryFor(spec, config.engine, image.get());
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
