// Hand-built FUSE requests for the protocol tests, and a ReplySink that
// records what would have gone to the kernel.
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "fuse/protocol/abi.h"
#include "fuse/protocol/reply.h"

namespace pvdisk::fuse::protocol::testing {

// A request as /dev/fuse delivers it: header, `op` struct bytes, payload.
// header.len is the real length unless `len_override` is given.
inline std::vector<uint8_t> BuildRequest(uint32_t opcode, uint64_t unique,
                                         uint64_t nodeid,
                                         std::span<const uint8_t> op,
                                         std::span<const uint8_t> payload,
                                         int64_t len_override = -1) {
  abi::fuse_in_header header{};
  header.opcode = opcode;
  header.unique = unique;
  header.nodeid = nodeid;
  size_t length = sizeof(header) + op.size() + payload.size();
  header.len = static_cast<uint32_t>(len_override >= 0 ? len_override : length);
  std::vector<uint8_t> bytes(length);
  std::memcpy(bytes.data(), &header, sizeof(header));
  if (!op.empty())
    std::memcpy(bytes.data() + sizeof(header), op.data(), op.size());
  if (!payload.empty()) {
    std::memcpy(bytes.data() + sizeof(header) + op.size(), payload.data(),
                payload.size());
  }
  return bytes;
}

template <typename T>
std::span<const uint8_t> AsBytes(const T& value) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&value),
                                  sizeof(T));
}

inline std::span<const uint8_t> AsBytes(const std::string& text) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                  text.size());
}

struct SentReply {
  uint64_t slot = 0;
  uint64_t unique = 0;
  int error = 0;
  std::string payload;
};

class RecordingSink final : public ReplySink {
 public:
  void Send(uint64_t slot, uint64_t unique, int error,
            std::span<const iovec> payload) override {
    SentReply reply{slot, unique, error, {}};
    for (const iovec& piece : payload) {
      reply.payload.append(static_cast<const char*>(piece.iov_base),
                           piece.iov_len);
    }
    std::lock_guard<std::mutex> lock(mu_);
    replies_.push_back(std::move(reply));
  }
  std::vector<SentReply> replies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return replies_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<SentReply> replies_;
};

template <typename T>
T PayloadAs(const SentReply& reply) {
  T value{};
  std::memcpy(&value, reply.payload.data(),
              std::min(sizeof(T), reply.payload.size()));
  return value;
}

}  // namespace pvdisk::fuse::protocol::testing
