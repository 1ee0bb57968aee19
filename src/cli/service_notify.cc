#include "cli/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace pvdisk::cli {
namespace {

// NOTIFY_SOCKET as it was at the first call ("" when unset).
const std::string& NotifySocket() {
  static const std::string* socket_name = [] {
    const char* value = std::getenv("NOTIFY_SOCKET");
    auto* name = new std::string(value != nullptr ? value : "");
    unsetenv("NOTIFY_SOCKET");
    return name;
  }();
  return *socket_name;
}

}  // namespace

absl::Status NotifyServiceManager(std::string_view state) {
  const std::string& name = NotifySocket();
  if (name.empty()) return absl::OkStatus();
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  if ((name[0] != '/' && name[0] != '@') ||
      name.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NOTIFY_SOCKET '", name,
        "' is neither a socket path nor an abstract name (@NAME)"));
  }
  std::memcpy(address.sun_path, name.data(), name.size());
  if (name[0] == '@') address.sun_path[0] = '\0';
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("NOTIFY_SOCKET: socket: ", strerror(errno)));
  }
  const ssize_t sent =
      sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
             reinterpret_cast<const sockaddr*>(&address), length);
  const int error = errno;
  close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    return absl::UnavailableError(
        absl::StrCat("NOTIFY_SOCKET ", name, ": ", strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::cli
