// Reply: the one answer a FUSE request gets, and ReplySink, the channel
// that carries it back to the kernel.
//
// A Reply is made by the Session for each request that needs an answer and
// handed to the Handler, which may answer at once or move the Reply into a
// completion callback and answer later from any thread. It is move-only and
// sends exactly once: the first Error()/Ok()/Data()/... sends, later calls
// do nothing. A Reply destroyed unanswered (a bug) answers EIO, so that the
// kernel's caller never hangs.
#pragma once

#include <sys/stat.h>
#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string_view>

#include "fuse/protocol/abi.h"

namespace pvdisk::fuse::protocol {

class ReplySink {
 public:
  virtual ~ReplySink() = default;
  // Sends the reply to request `unique`; `slot` is the channel's own handle
  // for where the request came from (the classic channel's fd, the uring
  // channel's ring entry). `error` is 0 or a positive errno; the payload
  // (the reply's argument bytes) goes only with error 0. Called once per
  // request, from any thread; must not block on I/O.
  virtual void Send(uint64_t slot, uint64_t unique, int error,
                    std::span<const iovec> payload) = 0;
  // The buffer the reply to `slot`'s request will be sent from, if the
  // channel has one of its own (a uring entry's payload), else empty. A
  // handler may have the reply's bytes put there; Send() then copies no
  // piece that is already in its place. Valid until Send() for that slot.
  virtual std::span<uint8_t> PayloadBuffer(uint64_t /*slot*/) { return {}; }
};

class Reply {
 public:
  Reply() = default;
  Reply(ReplySink* sink, uint64_t slot, uint64_t unique)
      : sink_(sink), slot_(slot), unique_(unique) {}
  Reply(Reply&& other) noexcept { *this = std::move(other); }
  Reply& operator=(Reply&& other) noexcept;
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  ~Reply();

  // Whether this Reply still has to be sent.
  bool pending() const { return sink_ != nullptr; }
  // ReplySink::PayloadBuffer for this reply; empty once sent.
  std::span<uint8_t> PayloadBuffer() const {
    return sink_ != nullptr ? sink_->PayloadBuffer(slot_)
                            : std::span<uint8_t>();
  }
  uint64_t unique() const { return unique_; }

  // `error` is a positive errno, or 0 for success with no data.
  void Error(int error);
  void Ok() { Error(0); }
  // Success with these bytes as the reply's arguments.
  void Data(std::span<const iovec> payload);
  void Bytes(const void* data, size_t size);
  template <typename T>
  void Struct(const T& value) {
    Bytes(&value, sizeof(T));
  }

 private:
  void Send(int error, std::span<const iovec> payload);

  ReplySink* sink_ = nullptr;
  uint64_t slot_ = 0;
  uint64_t unique_ = 0;
};

// Encoding helpers for the reply structs.
abi::fuse_attr AttrFromStat(const struct stat& st);
// `timeout` in seconds (fractions kept to the nanosecond).
abi::fuse_attr_out AttrOut(const struct stat& st, double timeout);
abi::fuse_entry_out EntryOut(uint64_t nodeid, const struct stat& st,
                             double timeout);
// The same with the name's and the attributes' timeouts apart.
abi::fuse_entry_out EntryOut(uint64_t nodeid, const struct stat& st,
                             double entry_timeout, double attr_timeout);
abi::fuse_open_out OpenOut(uint64_t fh, uint32_t open_flags);
abi::fuse_write_out WriteOut(uint32_t size);

// Appends one directory entry to `buffer` at `*used`; returns false (and
// changes nothing) if it does not fit. `next_offset` is what the kernel
// passes back to continue after this entry.
bool AddDirent(std::span<uint8_t> buffer, size_t* used, std::string_view name,
               uint64_t ino, uint32_t mode, uint64_t next_offset);

}  // namespace pvdisk::fuse::protocol
