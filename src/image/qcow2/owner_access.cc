#include "image/qcow2/owner_access.h"

#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace pvdisk::image::qcow2 {

FileUser OwnerOf(const struct stat& st) {
  FileUser user;
  user.uid = st.st_uid;
  user.groups.push_back(st.st_gid);
  // The user database names the uid's supplementary groups; a uid it does
  // not know has the image's group only.
  std::vector<char> buffer(16384);
  struct passwd entry = {};
  struct passwd* found = nullptr;
  if (getpwuid_r(st.st_uid, &entry, buffer.data(), buffer.size(), &found) !=
          0 ||
      found == nullptr) {
    return user;
  }
  int count = 64;
  std::vector<gid_t> groups(count);
  while (getgrouplist(found->pw_name, st.st_gid, groups.data(), &count) < 0) {
    if (count <= static_cast<int>(groups.size())) return user;  // no progress
    groups.resize(count);
  }
  groups.resize(count);
  for (gid_t gid : groups) {
    if (std::find(user.groups.begin(), user.groups.end(), gid) ==
        user.groups.end()) {
      user.groups.push_back(gid);
    }
  }
  return user;
}

bool ModeAllows(const struct stat& st, const FileUser& user, int want) {
  if (user.uid == 0) return true;
  int shift = 0;  // other
  if (st.st_uid == user.uid) {
    shift = 6;
  } else if (std::find(user.groups.begin(), user.groups.end(), st.st_gid) !=
             user.groups.end()) {
    shift = 3;
  }
  const int bits = (st.st_mode >> shift) & 07;
  return (bits & want) == want;
}

absl::Status CheckOwnerCanRead(const FileUser& user, const struct stat& st,
                               const std::string& backing,
                               const std::string& image) {
  if (user.uid == 0) return absl::OkStatus();
  const std::string refused =
      absl::StrCat("backing file ", backing, " of ", image,
                   " is not readable by the image's owner (uid ", user.uid,
                   "): refused, so that the image shows no file its owner "
                   "could not read");
  if (!ModeAllows(st, user, R_OK)) {
    return absl::PermissionDeniedError(refused);
  }
  char resolved[PATH_MAX];
  if (realpath(backing.c_str(), resolved) == nullptr) {
    return ErrnoError(errno, absl::StrCat("cannot resolve ", backing));
  }
  // Every directory from the root down to the file's own.
  std::string path = resolved;
  for (size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
    struct stat dir_st = {};
    if (stat(dir.c_str(), &dir_st) != 0) {
      return ErrnoError(errno, absl::StrCat("cannot stat ", dir));
    }
    if (!ModeAllows(dir_st, user, X_OK)) {
      return absl::PermissionDeniedError(
          absl::StrCat(refused, " (", dir, " is not searchable)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::image::qcow2
