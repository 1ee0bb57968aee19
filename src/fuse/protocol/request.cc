#include "fuse/protocol/request.h"

#include <cerrno>
#include <cstring>

namespace pvdisk::fuse::protocol {
namespace {

template <typename T>
T Load(std::span<const uint8_t> bytes) {
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

// A NUL-terminated name at the start of `bytes`; false if there is none.
bool LoadName(std::span<const uint8_t> bytes, std::string_view* name) {
  const void* nul = std::memchr(bytes.data(), 0, bytes.size());
  if (nul == nullptr) return false;
  size_t length = static_cast<const uint8_t*>(nul) - bytes.data();
  if (length == 0) return false;
  *name = std::string_view(reinterpret_cast<const char*>(bytes.data()), length);
  return true;
}

}  // namespace

uint32_t OpInSize(uint32_t opcode) {
  switch (opcode) {
    case abi::kForget:
      return sizeof(abi::fuse_forget_in);
    case abi::kBatchForget:
      return sizeof(abi::fuse_batch_forget_in);
    case abi::kGetattr:
      return sizeof(abi::fuse_getattr_in);
    case abi::kSetattr:
      return sizeof(abi::fuse_setattr_in);
    case abi::kOpen:
    case abi::kOpendir:
      return sizeof(abi::fuse_open_in);
    case abi::kRead:
    case abi::kReaddir:
      return sizeof(abi::fuse_read_in);
    case abi::kWrite:
      return sizeof(abi::fuse_write_in);
    case abi::kFsync:
      return sizeof(abi::fuse_fsync_in);
    case abi::kFlush:
      return sizeof(abi::fuse_flush_in);
    case abi::kRelease:
    case abi::kReleasedir:
      return sizeof(abi::fuse_release_in);
    case abi::kFallocate:
      return sizeof(abi::fuse_fallocate_in);
    case abi::kInterrupt:
      return sizeof(abi::fuse_interrupt_in);
    case abi::kInit:
      return abi::kInitInCompatSize;  // the rest is optional, see below
    default:
      return 0;  // LOOKUP (a name only), STATFS, DESTROY, unserved opcodes
  }
}

bool IsServed(uint32_t opcode) {
  switch (opcode) {
    case abi::kInit:
    case abi::kLookup:
    case abi::kForget:
    case abi::kBatchForget:
    case abi::kGetattr:
    case abi::kSetattr:
    case abi::kOpen:
    case abi::kRead:
    case abi::kWrite:
    case abi::kFsync:
    case abi::kFlush:
    case abi::kRelease:
    case abi::kOpendir:
    case abi::kReaddir:
    case abi::kReleasedir:
    case abi::kStatfs:
    case abi::kFallocate:
    case abi::kInterrupt:
    case abi::kDestroy:
      return true;
    default:
      return false;
  }
}

int SplitClassic(std::span<const uint8_t> buffer, RawRequest* raw) {
  *raw = RawRequest();
  if (buffer.size() < sizeof(abi::fuse_in_header)) return -EINVAL;
  const auto* header =
      reinterpret_cast<const abi::fuse_in_header*>(buffer.data());
  raw->header = header;  // enough to answer, even if the rest is wrong
  if (header->len != buffer.size()) return -EINVAL;
  std::span<const uint8_t> body = buffer.subspan(sizeof(abi::fuse_in_header));
  // Extensions (security context, groups) come last; we negotiate none, but
  // a request that claims more than it has is malformed.
  size_t extension_bytes = size_t{header->total_extlen} * 8;
  if (extension_bytes > body.size()) return -EPROTO;
  body = body.first(body.size() - extension_bytes);
  // INIT's struct grew over time: take whatever the kernel sent.
  size_t op_size = header->opcode == abi::kInit
                       ? std::min(body.size(), sizeof(abi::fuse_init_in))
                       : OpInSize(header->opcode);
  if (op_size > body.size()) op_size = body.size();  // DecodeRequest rejects
  raw->op_in = body.first(op_size);
  raw->payload = body.subspan(op_size);
  return 0;
}

int DecodeRequest(const RawRequest& raw, const DecodeLimits& limits,
                  Request* out) {
  *out = Request();
  if (raw.header == nullptr) return -EINVAL;
  const abi::fuse_in_header& header = *raw.header;
  out->opcode = static_cast<abi::Opcode>(header.opcode);
  out->unique = header.unique;
  out->nodeid = header.nodeid;
  out->uid = header.uid;
  out->gid = header.gid;
  out->pid = header.pid;
  if (!IsServed(header.opcode)) return -ENOSYS;
  if (raw.op_in.size() < OpInSize(header.opcode)) return -EINVAL;
  const std::span<const uint8_t> op = raw.op_in;
  switch (header.opcode) {
    case abi::kInit: {
      out->init_size = static_cast<uint32_t>(op.size());
      std::memcpy(&out->init, op.data(),
                  std::min(op.size(), sizeof(abi::fuse_init_in)));
      if (!(out->init.flags & abi::kInitExt)) out->init.flags2 = 0;
      return 0;
    }
    case abi::kLookup:
      if (!LoadName(raw.payload, &out->name)) return -EINVAL;
      return 0;
    case abi::kForget:
      out->nlookup = Load<abi::fuse_forget_in>(op).nlookup;
      return 0;
    case abi::kBatchForget: {
      auto in = Load<abi::fuse_batch_forget_in>(op);
      if (raw.payload.size() / sizeof(abi::fuse_forget_one) < in.count) {
        return -EINVAL;
      }
      out->forget_count = in.count;
      out->forgets =
          raw.payload.first(size_t{in.count} * sizeof(abi::fuse_forget_one));
      return 0;
    }
    case abi::kGetattr:
      out->fh = Load<abi::fuse_getattr_in>(op).fh;
      return 0;
    case abi::kSetattr:
      out->setattr = Load<abi::fuse_setattr_in>(op);
      out->fh = out->setattr.fh;
      return 0;
    case abi::kOpen:
    case abi::kOpendir:
      out->flags = Load<abi::fuse_open_in>(op).flags;
      return 0;
    case abi::kRead:
    case abi::kReaddir: {
      auto in = Load<abi::fuse_read_in>(op);
      if (in.size == 0 || in.size > limits.max_read) return -EINVAL;
      if (in.offset > uint64_t{INT64_MAX}) return -EINVAL;
      out->fh = in.fh;
      out->offset = in.offset;
      out->size = in.size;
      return 0;
    }
    case abi::kWrite: {
      auto in = Load<abi::fuse_write_in>(op);
      if (in.size > limits.max_write || in.size > raw.payload.size()) {
        return -EINVAL;
      }
      if (in.offset > uint64_t{INT64_MAX} - in.size) return -EINVAL;
      out->fh = in.fh;
      out->offset = in.offset;
      out->data = raw.payload.first(in.size);
      return 0;
    }
    case abi::kFsync: {
      auto in = Load<abi::fuse_fsync_in>(op);
      out->fh = in.fh;
      out->flags = in.fsync_flags;
      return 0;
    }
    case abi::kFlush:
      out->fh = Load<abi::fuse_flush_in>(op).fh;
      return 0;
    case abi::kRelease:
    case abi::kReleasedir: {
      auto in = Load<abi::fuse_release_in>(op);
      out->fh = in.fh;
      out->flags = in.flags;
      return 0;
    }
    case abi::kFallocate: {
      auto in = Load<abi::fuse_fallocate_in>(op);
      if (in.offset > uint64_t{INT64_MAX} || in.length > uint64_t{INT64_MAX} ||
          in.offset + in.length > uint64_t{INT64_MAX}) {
        return -EINVAL;
      }
      out->fh = in.fh;
      out->offset = in.offset;
      out->length = in.length;
      out->flags = in.mode;
      return 0;
    }
    case abi::kInterrupt:
      out->interrupted = Load<abi::fuse_interrupt_in>(op).unique;
      return 0;
    case abi::kStatfs:
    case abi::kDestroy:
      return 0;
  }
  return -ENOSYS;
}

std::string_view OpcodeName(uint32_t opcode) {
  switch (opcode) {
    case abi::kInit:
      return "INIT";
    case abi::kLookup:
      return "LOOKUP";
    case abi::kForget:
      return "FORGET";
    case abi::kBatchForget:
      return "BATCH_FORGET";
    case abi::kGetattr:
      return "GETATTR";
    case abi::kSetattr:
      return "SETATTR";
    case abi::kOpen:
      return "OPEN";
    case abi::kRead:
      return "READ";
    case abi::kWrite:
      return "WRITE";
    case abi::kFsync:
      return "FSYNC";
    case abi::kFlush:
      return "FLUSH";
    case abi::kRelease:
      return "RELEASE";
    case abi::kOpendir:
      return "OPENDIR";
    case abi::kReaddir:
      return "READDIR";
    case abi::kReleasedir:
      return "RELEASEDIR";
    case abi::kStatfs:
      return "STATFS";
    case abi::kFallocate:
      return "FALLOCATE";
    case abi::kInterrupt:
      return "INTERRUPT";
    case abi::kDestroy:
      return "DESTROY";
    default:
      return "?";
  }
}

}  // namespace pvdisk::fuse::protocol
