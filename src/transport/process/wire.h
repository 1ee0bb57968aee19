// The daemon and a backend process talk over a SOCK_SEQPACKET unix socket:
// each message is one packet holding a byte payload and, optionally, file
// descriptors (SCM_RIGHTS). Payloads are built with WireWriter and read back
// with WireReader: fixed-width numbers and length-prefixed strings, checked
// on reading (the peer may be gone half-way, never trusted blindly).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pvdisk::transport::process {

// Most descriptors one packet carries.
inline constexpr size_t kMaxPacketFds = 16;

struct Packet {
  std::string payload;
  std::vector<int> fds;  // owned by the receiver
};

// Sends one packet. `fds` stay open (the kernel passes copies).
absl::Status SendPacket(int socket, std::string_view payload,
                        const std::vector<int>& fds);

// Receives one packet, waiting up to `timeout_ms` (negative: forever).
// Unavailable when the peer closed its end, DeadlineExceeded on timeout.
absl::StatusOr<Packet> ReceivePacket(int socket, int timeout_ms);

// Closes every descriptor of `packet` (when it is not wanted after all).
void CloseFds(Packet& packet);

class WireWriter {
 public:
  void PutU64(uint64_t value);
  void PutString(std::string_view value);
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  // False (and nothing read) when the payload is too short.
  bool GetU64(uint64_t* value);
  bool GetString(std::string* value);

 private:
  std::string_view data_;
};

}  // namespace pvdisk::transport::process
