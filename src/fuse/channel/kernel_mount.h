// KernelMount: a FUSE mount and its /dev/fuse fd.
//
// Mounting goes through libfuse3 (fuse_session_mount), and only that: as
// root it calls mount(2), as an unprivileged user it runs the setuid
// fusermount3, which is how such a user may mount at all. libfuse's
// request loop is never run; pvdisk's own protocol layer serves the fd.
// Unmount() (or the destructor) closes the fd and detaches the mount, the
// same way (umount2 as root, fusermount3 -u otherwise).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct fuse_session;

namespace pvdisk::fuse::channel {

class KernelMount {
 public:
  // `options`: the -o mount options (fsname=..., allow_other, ...).
  static absl::StatusOr<std::unique_ptr<KernelMount>> Mount(
      const std::string& mountpoint, const std::string& options);
  ~KernelMount();
  KernelMount(const KernelMount&) = delete;
  KernelMount& operator=(const KernelMount&) = delete;

  // The /dev/fuse fd of the connection (-1 after Unmount).
  int fd() const;
  // Closes the fd and detaches the mount. Idempotent.
  void Unmount();

 private:
  KernelMount() = default;
  fuse_session* session_ = nullptr;
  bool mounted_ = false;
};

}  // namespace pvdisk::fuse::channel
