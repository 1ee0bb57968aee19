// Request: one FUSE request, decoded and validated, as the Handler sees it.
//
// DecodeRequest() turns the raw bytes a channel received into a Request. It
// trusts nothing: every length and offset is checked against the bytes that
// are really there, so a malformed request becomes an error code, never an
// out-of-bounds read. The two channels deliver a request in different
// shapes, so decoding takes three parts:
// - the fuse_in_header;
// - `op_in`: the opcode's fixed argument struct (fuse_read_in, ...);
// - `payload`: what follows it (a name, WRITE data, BATCH_FORGET entries).
// SplitClassic() cuts a /dev/fuse read buffer into these parts; the uring
// channel finds them in its ring entry's header and payload buffers.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "fuse/protocol/abi.h"

namespace pvdisk::fuse::protocol {

// The limits a request is checked against (from the INIT negotiation).
struct DecodeLimits {
  uint32_t max_write = 1 << 20;  // largest WRITE payload
  uint32_t max_read = 1 << 20;   // largest READ / READDIR size
};

struct Request {
  abi::Opcode opcode = abi::kLookup;
  uint64_t unique = 0;
  uint64_t nodeid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t pid = 0;

  // Fields by opcode; the others stay zero.
  std::string_view name;             // LOOKUP (without the terminating NUL)
  uint64_t fh = 0;                   // file handle: READ WRITE RELEASE ...
  uint64_t offset = 0;               // READ WRITE READDIR FALLOCATE
  uint32_t size = 0;                 // READ READDIR: bytes wanted
  uint64_t length = 0;               // FALLOCATE
  uint32_t flags = 0;                // OPEN/OPENDIR open flags; FALLOCATE mode;
                                     // FSYNC fsync_flags
  std::span<const uint8_t> data;     // WRITE: the bytes to write
  uint64_t nlookup = 0;              // FORGET
  std::span<const uint8_t> forgets;  // BATCH_FORGET: count fuse_forget_one
  uint32_t forget_count = 0;
  uint64_t interrupted = 0;        // INTERRUPT: the unique interrupted
  abi::fuse_setattr_in setattr{};  // SETATTR
  abi::fuse_init_in init{};        // INIT (flags2 zero unless INIT_EXT)
  uint32_t init_size = 0;          // INIT: bytes the kernel sent
};

// The parts of a raw request.
struct RawRequest {
  const abi::fuse_in_header* header = nullptr;
  std::span<const uint8_t> op_in;
  std::span<const uint8_t> payload;
};

// Bytes of the fixed argument struct of `opcode` (0 if it has none or we
// do not serve it).
uint32_t OpInSize(uint32_t opcode);

// Whether the opcode is one we decode (the others are answered ENOSYS).
bool IsServed(uint32_t opcode);

// Whether the kernel expects no reply to the opcode, even a malformed one:
// FORGET and BATCH_FORGET have no one waiting, and INTERRUPT may be ignored
// (fuse.rst). Inline: asked of every request on the hot path.
inline bool ExpectsNoReply(uint32_t opcode) {
  return opcode == abi::kForget || opcode == abi::kBatchForget ||
         opcode == abi::kInterrupt;
}

// Cuts a request read from /dev/fuse (`buffer`, exactly the bytes read)
// into its parts. Returns 0, or -EINVAL if the header is short or its len
// disagrees with the bytes read, or -EPROTO if the extension length does
// not fit. Whenever the buffer holds a whole header, `raw->header` is set,
// even on error, so that the request can be answered.
int SplitClassic(std::span<const uint8_t> buffer, RawRequest* raw);

// Decodes `raw` into `out`. Returns 0, -ENOSYS for an opcode we do not
// serve, or -EINVAL/-EPROTO for a malformed request (an argument struct
// that does not fit, a name without its NUL, a WRITE whose size disagrees
// with its data or exceeds max_write, a READ of 0 or more than max_read,
// ...). The header fields of `out` are filled in even on error, so the
// request can be answered. `out` points into `raw`'s buffers.
int DecodeRequest(const RawRequest& raw, const DecodeLimits& limits,
                  Request* out);

std::string_view OpcodeName(uint32_t opcode);

}  // namespace pvdisk::fuse::protocol
