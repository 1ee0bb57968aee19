#include "fuse/channel/kernel_mount.h"

#include <fuse_lowlevel.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pvdisk::fuse::channel {

absl::StatusOr<std::unique_ptr<KernelMount>> KernelMount::Mount(
    const std::string& mountpoint, const std::string& options) {
  std::unique_ptr<KernelMount> mount(new KernelMount());
  // An empty operation table: the session exists only to parse the mount
  // options and to mount; its loop never runs.
  fuse_lowlevel_ops no_ops;
  std::memset(&no_ops, 0, sizeof(no_ops));
  const char* argv[] = {"pvdisk", "-o", options.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  mount->session_ = fuse_session_new(&args, &no_ops, sizeof(no_ops), nullptr);
  if (mount->session_ == nullptr) {
    return absl::InternalError(
        absl::StrCat("fuse_session_new refused the mount options '", options,
                     "' (see message above)"));
  }
  if (fuse_session_mount(mount->session_, mountpoint.c_str()) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot mount on ", mountpoint,
        " (is /dev/fuse available and are you allowed to mount?)"));
  }
  mount->mounted_ = true;
  return mount;
}

KernelMount::~KernelMount() {
  Unmount();
  if (session_ != nullptr) fuse_session_destroy(session_);
}

int KernelMount::fd() const {
  return mounted_ ? fuse_session_fd(session_) : -1;
}

void KernelMount::Unmount() {
  if (!mounted_) return;
  mounted_ = false;
  // Closes the fd first (a synchronous umount could otherwise wait on this
  // very connection), then umount2(MNT_DETACH) or fusermount3 -u -z.
  fuse_session_unmount(session_);
}

}  // namespace pvdisk::fuse::channel
