#include "fuse/attributes.h"

#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pvdisk::fuse {
namespace {

// Whether a member of group `gid` who is not the image's owner may read it:
// the kernel checks the group bits if the image belongs to that group, the
// other bits otherwise.
bool GroupMayRead(gid_t gid, const struct stat& image) {
  return image.st_gid == gid ? (image.st_mode & S_IRGRP) != 0
                             : (image.st_mode & S_IROTH) != 0;
}

}  // namespace

MountOwner CurrentMountOwner() { return MountOwner{geteuid(), getegid()}; }

mode_t StatsMode(const MountOwner& owner,
                 const std::vector<struct stat>& images, bool writable) {
  bool group = true;
  bool others = true;
  for (const struct stat& image : images) {
    group = group && GroupMayRead(owner.gid, image);
    others = others && (image.st_mode & S_IROTH) != 0;
  }
  return S_IRUSR | (writable ? S_IWUSR : 0) | (group ? S_IRGRP : 0) |
         (others ? S_IROTH : 0);
}

void FillAttributes(Node node, const Disk* disk,
                    const std::vector<const Disk*>& disks,
                    const MountOwner& owner, const timespec& mount_time,
                    struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_uid = owner.uid;
  st->st_gid = owner.gid;
  st->st_atim = st->st_mtim = st->st_ctim = mount_time;
  st->st_blksize = 4096;
  st->st_nlink = 1;
  switch (node) {
    case Node::kRoot:
      st->st_mode = S_IFDIR | 0755;
      st->st_nlink = 2;
      return;
    case Node::kStats:
    case Node::kStatsJson: {
      std::vector<struct stat> images;
      for (const Disk* d : disks) images.push_back(d->image_stat());
      // Size 0: the contents are made at open; direct_io makes readers
      // read until they get 0 bytes, as with /proc files.
      st->st_mode = S_IFREG | StatsMode(owner, images,
                                        /*writable=*/node == Node::kStats);
      return;
    }
    case Node::kTrace:
      // The mount's owner only: it sees every request's sector and size.
      st->st_mode = S_IFREG | 0600;
      return;
    case Node::kDisk: {
      const struct stat& image = disk->image_stat();
      mode_t bits = image.st_mode & 0777;
      if (disk->read_only()) bits &= ~mode_t{0222};
      st->st_mode = S_IFREG | bits;
      st->st_uid = image.st_uid;
      st->st_gid = image.st_gid;
      st->st_atim = image.st_atim;
      st->st_mtim = image.st_mtim;
      st->st_ctim = image.st_ctim;
      st->st_size = static_cast<off_t>(disk->size_bytes());
      st->st_blocks = static_cast<blkcnt_t>(disk->size_bytes() / 512);
      return;
    }
  }
}

std::string FuseMountOptions(pid_t daemon_pid, bool allow_other) {
  std::string options = absl::StrCat("fsname=pvdisk-", daemon_pid,
                                     ",subtype=pvdisk,default_permissions");
  if (allow_other) absl::StrAppend(&options, ",allow_other");
  return options;
}

}  // namespace pvdisk::fuse
