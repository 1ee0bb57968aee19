// What `--disk rbd:POOL/IMAGE[,conf=PATH][,id=CLIENT][,timeout=SECONDS]`
// names: an RBD image and how to reach its cluster. Plain data, no librbd:
// the command line and DiskSpec use it without linking Ceph.
#pragma once

#include <cstdint>
#include <string>

namespace pvdisk::io {

// How long a cluster may stay silent before pvdisk gives up, in seconds: the
// connect at mount (librados' client_mount_timeout and rados_mon_op_timeout)
// and every I/O (rados_osd_op_timeout: an I/O the cluster does not answer in
// time fails with EIO instead of waiting forever; a write librbd holds back
// longer the rbd engine answers with EIO itself, see rbd_engine.cc), and
// the image's close at unmount. Below Ceph's OSD failover time (osd heartbeat
// grace, 20 s) I/O may fail while a real cluster replaces an OSD: raise it
// there.
inline constexpr uint32_t kDefaultRbdTimeoutSeconds = 15;
inline constexpr uint32_t kMaxRbdTimeoutSeconds = 3600;

struct RbdSpec {
  std::string pool;
  std::string image;
  // The cluster's ceph.conf (absolute once the mount checked it); empty:
  // librados' default search ($CEPH_CONF, /etc/ceph/ceph.conf, ...).
  std::string conf;
  // The client name without "client.", e.g. "admin"; empty: librados'
  // default (admin).
  std::string id;
  uint32_t timeout_seconds = kDefaultRbdTimeoutSeconds;

  // "rbd:POOL/IMAGE": how messages and the stats header name the image.
  std::string Name() const { return "rbd:" + pool + "/" + image; }
};

}  // namespace pvdisk::io
