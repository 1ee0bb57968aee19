#include "transport/process/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/errno_status.h"

namespace pvdisk::transport::process {
namespace {

// Large enough for any payload we send (the setup is a few hundred bytes).
constexpr size_t kMaxPayload = 64 * 1024;

}  // namespace

absl::Status SendPacket(int socket, std::string_view payload,
                        const std::vector<int>& fds) {
  if (fds.size() > kMaxPacketFds) {
    return absl::InvalidArgumentError("too many descriptors for one packet");
  }
  iovec data{const_cast<char*>(payload.data()), payload.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPacketFds)];
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    ssize_t sent = sendmsg(socket, &message, MSG_NOSIGNAL);
    if (sent >= 0) return absl::OkStatus();
    if (errno != EINTR) return ErrnoError(errno, "sendmsg to the peer");
  }
}

absl::StatusOr<Packet> ReceivePacket(int socket, int timeout_ms) {
  pollfd watched{socket, POLLIN, 0};
  int ready;
  do {
    ready = poll(&watched, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return ErrnoError(errno, "poll of the peer's socket");
  if (ready == 0) {
    return absl::DeadlineExceededError("the peer did not answer in time");
  }
  Packet packet;
  packet.payload.resize(kMaxPayload);
  iovec data{packet.payload.data(), packet.payload.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPacketFds)];
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return ErrnoError(errno, "recvmsg from the peer");
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) {
      continue;
    }
    size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      packet.fds.push_back(fd);
    }
  }
  if (got == 0 && packet.fds.empty()) {
    return absl::UnavailableError("the peer closed the connection");
  }
  if ((message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    CloseFds(packet);
    return absl::DataLossError("a packet from the peer was truncated");
  }
  packet.payload.resize(static_cast<size_t>(got));
  return packet;
}

void CloseFds(Packet& packet) {
  for (int fd : packet.fds) close(fd);
  packet.fds.clear();
}

void WireWriter::PutU64(uint64_t value) {
  char bytes[sizeof(value)];
  std::memcpy(bytes, &value, sizeof(value));
  data_.append(bytes, sizeof(bytes));
}

void WireWriter::PutString(std::string_view value) {
  PutU64(value.size());
  data_.append(value.data(), value.size());
}

bool WireReader::GetU64(uint64_t* value) {
  if (data_.size() < sizeof(*value)) return false;
  std::memcpy(value, data_.data(), sizeof(*value));
  data_.remove_prefix(sizeof(*value));
  return true;
}

bool WireReader::GetString(std::string* value) {
  uint64_t size;
  if (!GetU64(&size)) return false;
  if (data_.size() < size) return false;
  value->assign(data_.data(), size);
  data_.remove_prefix(size);
  return true;
}

}  // namespace pvdisk::transport::process
