#include "cli/disk_options.h"

#include "absl/strings/str_cat.h"

namespace pvdisk::cli {

const std::vector<DiskOptionInfo>& DiskOptions() {
  static const std::vector<DiskOptionInfo> options = {
      {"ro", "", "serve the disk read-only"},
      {"lock=on|off", "",
       "lock=off takes no image lock (by default a read-write disk refuses "
       "an image another pvdisk or QEMU uses); not for rbd: disks, whose "
       "image has its own exclusive lock"},
      {"format=raw|qcow2", "",
       "the image's format (default: probed from its header); a qcow2 image "
       "is served with its backing chain"},
      {"size=SIZE", "", "the size the disk must have (refused otherwise)"},
      {"eio=SECTOR[+COUNT]", "",
       "fail I/O on those 512-byte sectors with EIO (fault injection)"},
      {"delay=US", "",
       "hold each completion US microseconds after submission, on any "
       "engine: a device latency model"},
      {"delay-write=US", "", "the same for writes, overriding delay="},
      {"l2_cache=SIZE", "qcow2",
       "the L2 tables kept in memory (default: the whole disk's, at most "
       "32M)"},
      {"snapshot=NAME", "qcow2",
       "serve the internal snapshot of that id or name (pvdisk info lists "
       "them), read-only"},
      {"cache=volatile|writethrough", "",
       "cache=volatile models a volatile write cache: writes are held until "
       "a flush, and pvdisk powercut can lose them (raw and writable qcow2 "
       "images)"},
      {"cache_size=SIZE", "",
       "the bytes cache=volatile holds, written out or not, before a write "
       "must wait for a write-out (default 64M)"},
      {"log=FILE", "",
       "append every write, discard and flush to FILE in dm-log-writes' "
       "format, for pvdisk replay; FILE is replaced once "
       "the disk serves, and left as it was if the mount fails"},
      {"conf=PATH", "rbd", "the cluster's ceph.conf"},
      {"id=CLIENT", "rbd", "the client name"},
      {"timeout=SECONDS", "rbd",
       "how long the cluster may stay silent, at mount, per I/O and at "
       "unmount (default 15)"},
  };
  return options;
}

std::string AllowedDiskOptions(bool rbd) {
  std::string files, rbds;
  for (const DiskOptionInfo& option : DiskOptions()) {
    if (option.applies == "rbd") {
      absl::StrAppend(&rbds, rbds.empty() ? "" : ", ",
                      std::string(option.syntax));
      continue;
    }
    absl::StrAppend(&files, files.empty() ? "" : ", ",
                    std::string(option.syntax));
    if (!option.applies.empty()) {
      absl::StrAppend(&files, " (", std::string(option.applies), ")");
    }
  }
  return rbd ? absl::StrCat(files, ", and for rbd: disks ", rbds) : files;
}

}  // namespace pvdisk::cli
