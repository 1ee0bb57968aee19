#include "fuse/filesystem.h"

#include <fuse_lowlevel.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "fuse/attributes.h"
#include "fuse/fuse_ops.h"

namespace pvdisk::fuse {
Filesystem::Filesystem(std::vector<std::unique_ptr<Disk>> disks,
                       unsigned fuse_threads, bool allow_other)
    : disks_(std::move(disks)),
      fuse_threads_(fuse_threads),
      allow_other_(allow_other) {
  for (auto& disk : disks_)
    disk_ios_.push_back(std::make_unique<DiskIo>(disk.get()));
}

Filesystem::~Filesystem() {
  for (auto& disk : disks_) disk->Shutdown();
}

std::string Filesystem::StatsText() const {
  std::vector<stats::DiskReport> reports;
  for (const auto& disk : disks_) reports.push_back(disk->Report());
  return stats::RenderText(reports);
}

std::string Filesystem::StatsJson() const {
  std::vector<stats::DiskReport> reports;
  for (const auto& disk : disks_) reports.push_back(disk->Report());
  return stats::RenderJson(reports);
}

void Filesystem::ResetStats() {
  for (auto& disk : disks_) disk->ResetStats();
}

absl::Status Filesystem::MountAndServe(
    const std::string& mountpoint, const std::function<void()>& on_mounted) {
  std::string options = FuseMountOptions(getpid(), allow_other_);
  const char* argv[] = {"pvdisk", "-o", options.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  fuse_session* session = fuse_session_new(&args, &FilesystemOps(),
                                           sizeof(fuse_lowlevel_ops), this);
  if (session == nullptr) {
    return absl::InternalError("fuse_session_new failed (see message above)");
  }
  if (fuse_set_signal_handlers(session) != 0) {
    fuse_session_destroy(session);
    return absl::InternalError("cannot install signal handlers");
  }
  if (fuse_session_mount(session, mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot mount on ", mountpoint,
        " (is /dev/fuse available and are you allowed to mount?)"));
  }
  on_mounted();

  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(config, 1);
  // Handlers never wait for I/O, so a few readers of /dev/fuse keep the
  // queue drained; libfuse starts them on demand up to this number.
  fuse_loop_cfg_set_max_threads(config, fuse_threads_);
  int loop_result = fuse_session_loop_mt(session, config);
  fuse_loop_cfg_destroy(config);

  // Stop taking work (the loop has ended), finish everything in flight, make
  // it durable, then unmount.
  for (auto& disk : disks_) disk->Shutdown();
  fuse_session_unmount(session);
  fuse_remove_signal_handlers(session);
  fuse_session_destroy(session);
  if (loop_result < 0) {
    return absl::InternalError(
        absl::StrCat("FUSE loop failed: ", strerror(-loop_result)));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::fuse
