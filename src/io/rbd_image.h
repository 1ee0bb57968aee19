// An open RBD image: the librados connection to its cluster, the pool's I/O
// context and the librbd image handle, shared by every RbdEngine of one disk.
// Control path. (Completions go from librbd's callback straight to the
// engine that submitted the request: rbd_engine.cc.)
#pragma once

#include <rados/librados.h>
#include <rbd/librbd.h>
#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "io/rbd_spec.h"

namespace pvdisk::io {

class RbdImage {
 public:
  // Connects to the cluster named by spec.conf, opens the pool and the image
  // (read-only with `read_only`). Every wait is bounded by
  // spec.timeout_seconds. Errors are one line naming what is wrong: the
  // configuration, an unreachable cluster, a missing pool or image.
  static absl::StatusOr<std::unique_ptr<RbdImage>> Open(const RbdSpec& spec,
                                                        bool read_only);
  // Closes the image and the connection. REQUIRES: no engine is left.
  // Bounded by the timeout: if the cluster does not answer the close in
  // time, the connection is left to the process's exit.
  ~RbdImage();
  RbdImage(const RbdImage&) = delete;
  RbdImage& operator=(const RbdImage&) = delete;

  const RbdSpec& spec() const { return spec_; }
  rbd_image_t handle() const { return image_; }
  uint64_t size_bytes() const { return size_bytes_; }
  uint64_t size_sectors() const { return size_bytes_ / 512; }
  bool read_only() const { return read_only_; }
  // librbd's id of the image: stable while the image exists.
  const std::string& id() const { return id_; }
  // Whether the image has librbd's exclusive-lock feature: then one client
  // at a time writes, and a client takes the lock from a dead owner only by
  // blocklisting it at the cluster, so that none of the dead one's writes
  // lands afterwards.
  bool exclusive_lock() const { return exclusive_lock_; }
  // This client's address at the cluster (rados_getaddrs): what names it as
  // the exclusive lock's owner. Empty if librados did not tell.
  const std::string& client_address() const { return client_address_; }
  // Fences off the client at `address` (another process's open of this
  // image, now dead): if it owns the exclusive lock, breaks the lock, which
  // blocklists it at the cluster, so that none of its writes lands after
  // this returns. A client that does not own the lock has no write in
  // flight (librbd gives the lock up only once its writes are done): OK
  // then too. Bounded by the timeout.
  absl::Status FenceDeadClient(const std::string& address);
  // What the disk file shows: owned by the serving user, mode 0644 (0444
  // read-only), times of the open.
  const struct stat& attributes() const { return attributes_; }

  // Makes every write so far durable (rbd_flush); bounded by the timeout.
  absl::Status Flush();

 private:
  RbdImage() = default;
  // Closes the image (rbd_aio_close); false if that did not finish within
  // `seconds` (the image then stays open).
  bool CloseWithin(uint32_t seconds);

  RbdSpec spec_;
  rados_t cluster_ = nullptr;
  rados_ioctx_t ioctx_ = nullptr;
  rbd_image_t image_ = nullptr;
  uint64_t size_bytes_ = 0;
  bool read_only_ = false;
  bool exclusive_lock_ = false;
  std::string client_address_;
  std::string id_;
  struct stat attributes_ = {};
};

}  // namespace pvdisk::io
