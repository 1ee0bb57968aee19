#include "io/rbd_image.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/thread.h"

namespace pvdisk::io {
namespace {

std::string ErrnoText(int negative_errno) { return strerror(-negative_errno); }

// Settings pvdisk imposes on top of the cluster's ceph.conf.
absl::Status Configure(rados_t cluster, const RbdSpec& spec) {
  const std::string timeout = absl::StrCat(spec.timeout_seconds);
  const std::pair<const char*, std::string> settings[] = {
      // Bounded waits: the connect at mount, monitor commands, and every
      // OSD operation (an I/O the cluster does not answer fails instead of
      // waiting forever).
      {"client_mount_timeout", timeout},
      {"rados_mon_op_timeout", timeout},
      {"rados_osd_op_timeout", timeout},
      // No throttle in librados' Objecter (0: unlimited). Its default
      // limits (1024 operations, 100 MiB of data in flight) are below what
      // pvdisk's rings may have in flight (queues x ring slots x 1 MiB).
      // Beyond them librbd's I/O threads block in the Objecter until
      // earlier operations finish, and an operation's timeout only starts
      // once it is past the throttle: with a cluster that holds I/O (full,
      // paused, a hung OSD) requests then failed only after several
      // timeouts, one batch after another, and the completions of the
      // others waited behind the blocked threads. Without the throttle
      // every operation is handed to the cluster at once and fails one
      // timeout after it was queued. What bounds pvdisk's I/O in flight
      // is its own queues, and librbd holds a copy of every write it has
      // accepted either way (rbd_disable_zero_copy_writes).
      {"objecter_inflight_ops", "0"},
      {"objecter_inflight_op_bytes", "0"},
      // The daemon's stderr is the mount's: librados' own log lines must not
      // reach it, and it needs no admin socket or log file.
      {"log_to_stderr", "false"},
      {"err_to_stderr", "false"},
      {"log_file", ""},
      {"admin_socket", ""},
      // A discard must read back as zeros, also where it covers only part of
      // an object (by default librbd skips such parts).
      {"rbd_skip_partial_discard", "false"},
      // librbd copies a write's data when it takes the write, so the
      // caller's buffers are free once rbd_aio_write returns: the rbd engine
      // answers a write the cluster holds too long without waiting for
      // librbd to let go of it (RbdEngine, "Requests the cluster holds").
      {"rbd_disable_zero_copy_writes", "true"},
      // No client-side cache: a write completes once the cluster has it
      // (what the guest's flush semantics expect of a disk without a
      // volatile cache), and a write the cluster cannot take fails within
      // the timeout instead of waiting in librbd's writeback forever.
      {"rbd_cache", "false"},
      // No reordering below pvdisk's own queues: without the cache librbd
      // otherwise puts its "simple" scheduler in front of every object,
      // which holds a write back while an earlier write to the same object
      // is in flight (to merge them). pvdisk's rings already merge adjacent
      // requests; below them the hold made sequential 1 MiB writes on 4 MiB
      // objects go out about one object at a time: fio's rbd engine with
      // the cache off wrote 352-437 IOPS with the scheduler and 511-555
      // without (docs/perf/compare-rbd-2026-12-02-scheduler-none.md).
      {"rbd_io_scheduler", "none"},
      // librbd dispatches each request on the thread that submits it (the
      // rbd engine's), not by posting it to its own io_context thread:
      // that hand-off cost a futex wake-up and a context switch of that
      // thread per request (docs/perf/rbd-gap-2026-12-06.md). Submitting
      // does not block: the Objecter throttle, which could, is off (above),
      // and librbd queues what waits for the exclusive lock or an image
      // refresh.
      {"rbd_non_blocking_aio", "false"},
  };
  for (const auto& [key, value] : settings) {
    int ret = rados_conf_set(cluster, key, value.c_str());
    if (ret < 0) {
      return absl::InternalError(absl::StrCat("cannot set librados option ",
                                              key, ": ", ErrnoText(ret)));
    }
  }
  return absl::OkStatus();
}

std::string ClusterName(const RbdSpec& spec) {
  return spec.conf.empty() ? std::string("the default Ceph configuration")
                           : absl::StrCat("the Ceph cluster of ", spec.conf);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RbdImage>> RbdImage::Open(const RbdSpec& spec,
                                                         bool read_only) {
  // librados and librbd start their threads here: they must not take the
  // signals meant for the thread that serves the mount (see base/thread.h).
  AllSignalsBlocked blocked;
  std::unique_ptr<RbdImage> image(new RbdImage());
  image->spec_ = spec;
  image->read_only_ = read_only;
  const std::string name = spec.Name();
  int ret = rados_create(&image->cluster_,
                         spec.id.empty() ? nullptr : spec.id.c_str());
  if (ret < 0) {
    image->cluster_ = nullptr;
    return absl::InternalError(absl::StrCat(
        name, ": cannot create a librados client: ", ErrnoText(ret)));
  }
  ret = rados_conf_read_file(image->cluster_,
                             spec.conf.empty() ? nullptr : spec.conf.c_str());
  if (ret < 0) {
    return absl::InvalidArgumentError(
        spec.conf.empty()
            ? absl::StrCat(
                  name,
                  ": no Ceph configuration found (looked in "
                  "$CEPH_CONF, /etc/ceph/ceph.conf, ~/.ceph/ceph.conf, "
                  "./ceph.conf); give one with conf=PATH")
            : absl::StrCat(name, ": cannot read Ceph configuration ", spec.conf,
                           ": ", ErrnoText(ret)));
  }
  if (absl::Status s = Configure(image->cluster_, spec); !s.ok()) return s;
  ret = rados_connect(image->cluster_);
  if (ret < 0) {
    return absl::UnavailableError(
        absl::StrCat(name, ": cannot reach ", ClusterName(spec), " within ",
                     spec.timeout_seconds,
                     " s (timeout=SECONDS sets the limit): ", ErrnoText(ret)));
  }
  ret = rados_ioctx_create(image->cluster_, spec.pool.c_str(), &image->ioctx_);
  if (ret < 0) {
    image->ioctx_ = nullptr;
    return absl::NotFoundError(
        ret == -ENOENT ? absl::StrCat(name, ": pool '", spec.pool,
                                      "' does not exist in ", ClusterName(spec))
                       : absl::StrCat(name, ": cannot open pool '", spec.pool,
                                      "': ", ErrnoText(ret)));
  }
  ret = read_only ? rbd_open_read_only(image->ioctx_, spec.image.c_str(),
                                       &image->image_, nullptr)
                  : rbd_open(image->ioctx_, spec.image.c_str(), &image->image_,
                             nullptr);
  if (ret < 0) {
    image->image_ = nullptr;
    return absl::NotFoundError(
        ret == -ENOENT
            ? absl::StrCat(name, ": image '", spec.image,
                           "' does not exist in pool '", spec.pool,
                           "' (create it with 'rbd create ", spec.pool, "/",
                           spec.image, " --size SIZE')")
            : absl::StrCat(name, ": cannot open the image: ", ErrnoText(ret)));
  }
  ret = rbd_get_size(image->image_, &image->size_bytes_);
  if (ret < 0) {
    return absl::InternalError(
        absl::StrCat(name, ": cannot read the image's size: ", ErrnoText(ret)));
  }
  if (image->size_bytes_ == 0 || image->size_bytes_ % 512 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the image has ", image->size_bytes_,
                     " bytes; pvdisk serves images of a whole number of "
                     "512-byte sectors (rbd resize)"));
  }
  uint64_t features = 0;
  ret = rbd_get_features(image->image_, &features);
  if (ret < 0) {
    return absl::InternalError(absl::StrCat(
        name, ": cannot read the image's features: ", ErrnoText(ret)));
  }
  image->exclusive_lock_ = (features & RBD_FEATURE_EXCLUSIVE_LOCK) != 0;
  char* address = nullptr;
  if (rados_getaddrs(image->cluster_, &address) == 0 && address != nullptr) {
    image->client_address_ = address;
    free(address);
  }
  char id[64] = {};
  if (rbd_get_id(image->image_, id, sizeof(id)) >= 0) image->id_ = id;

  struct stat& st = image->attributes_;
  st.st_mode = S_IFREG | (read_only ? 0444 : 0644);
  st.st_uid = geteuid();
  st.st_gid = getegid();
  st.st_nlink = 1;
  st.st_size = static_cast<off_t>(image->size_bytes_);
  clock_gettime(CLOCK_REALTIME, &st.st_mtim);
  st.st_atim = st.st_ctim = st.st_mtim;
  return image;
}

RbdImage::~RbdImage() {
  if (image_ != nullptr && !CloseWithin(spec_.timeout_seconds)) {
    // The cluster is gone: librbd still waits for it (releasing the
    // exclusive lock, unwatching), and tearing the connection down under an
    // open image is not safe. Leave both to the process's exit rather than
    // hold the unmount for several timeouts.
    LogInfo(
        "%s: the cluster did not answer the image's close within %u s; "
        "leaving the connection open",
        spec_.Name(), spec_.timeout_seconds);
    return;
  }
  if (ioctx_ != nullptr) rados_ioctx_destroy(ioctx_);
  if (cluster_ != nullptr) rados_shutdown(cluster_);
}

bool RbdImage::CloseWithin(uint32_t seconds) {
  rbd_completion_t completion;
  if (rbd_aio_create_completion(nullptr, nullptr, &completion) < 0) {
    rbd_close(image_);
    return true;
  }
  if (rbd_aio_close(image_, completion) < 0) {
    rbd_aio_release(completion);
    rbd_close(image_);
    return true;
  }
  // Control path, once: polling the completion is simpler than a callback.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!rbd_aio_is_complete(completion)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  rbd_aio_release(completion);
  return true;
}

absl::Status RbdImage::FenceDeadClient(const std::string& address) {
  if (address.empty()) return absl::OkStatus();
  rbd_lock_mode_t mode;
  char* owners[4] = {};
  size_t count = 4;
  int ret = rbd_lock_get_owners(image_, &mode, owners, &count);
  if (ret == -ENOENT) return absl::OkStatus();  // nobody holds the lock
  if (ret < 0) {
    return absl::UnavailableError(absl::StrCat(
        spec_.Name(),
        ": cannot read the exclusive lock's owner: ", ErrnoText(ret)));
  }
  bool owns = false;
  for (size_t i = 0; i < count; ++i) owns = owns || address == owners[i];
  rbd_lock_get_owners_cleanup(owners, count);
  if (!owns) return absl::OkStatus();
  ret = rbd_lock_break(image_, RBD_LOCK_MODE_EXCLUSIVE, address.c_str());
  // -ENOENT: the lock went meanwhile (broken by the dead client's
  // successor, which blocklisted it just the same).
  if (ret < 0 && ret != -ENOENT) {
    return absl::UnavailableError(
        absl::StrCat(spec_.Name(), ": cannot break the exclusive lock of ",
                     address, ": ", ErrnoText(ret)));
  }
  return absl::OkStatus();
}

absl::Status RbdImage::Flush() {
  if (read_only_) return absl::OkStatus();
  int ret = rbd_flush(image_);
  if (ret < 0) {
    return absl::UnavailableError(
        absl::StrCat(spec_.Name(), ": flush failed: ", ErrnoText(ret)));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::io
