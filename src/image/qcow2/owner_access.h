// Whether the owner of an image could read a file the image names (its
// backing file). The daemon often runs as root and the image may belong to
// someone else: a header they wrote must not show them a file they could
// not read themselves. So a backing file is opened only if the image's
// owner could read it, as the kernel would decide for that user: every
// directory on its canonical path searchable, and the file readable, by
// the owner's uid, its primary group (the image's group) and the
// supplementary groups of that uid (getgrouplist), from the mode bits.
// ACLs are not consulted. An image owned by root reads whatever root
// reads.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pvdisk::image::qcow2 {

// A user as the permission check sees them.
struct FileUser {
  uid_t uid = 0;
  std::vector<gid_t> groups;  // the primary group first
};

// The owner of a file with attributes `st`: its uid, its gid and the
// supplementary groups the user database gives that uid.
FileUser OwnerOf(const struct stat& st);

// Whether `user` may access a file with attributes `st` as `want` asks
// (R_OK, X_OK, or both), by the mode bits: the owner class if the uid
// matches, else the group class if any group matches, else other. Root
// (uid 0) may always.
bool ModeAllows(const struct stat& st, const FileUser& user, int want);

// OK if `user` could read the file `backing` whose attributes are `st`:
// every directory above its canonical path searchable and the file
// readable. Otherwise PermissionDenied naming `backing` (the path the
// image's name resolves to), the image `image` and the uid. Callers check
// the path's stat() before they open it (opening some files does
// something) and the open file's fstat() after (what is read is what was
// checked).
absl::Status CheckOwnerCanRead(const FileUser& user, const struct stat& st,
                               const std::string& backing,
                               const std::string& image);

}  // namespace pvdisk::image::qcow2
