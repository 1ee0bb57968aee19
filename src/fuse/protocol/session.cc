#include "fuse/protocol/session.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace pvdisk::fuse::protocol {
namespace {

// What we ask the kernel for; INIT enables what it also offers.
// - ASYNC_READ, ASYNC_DIO: many reads of one file in flight at once (an
//   io_uring/libaio direct read becomes background requests);
// - ATOMIC_O_TRUNC: O_TRUNC comes with OPEN, not as a SETATTR;
// - BIG_WRITES, MAX_PAGES: requests up to max_write (1 MiB) instead of 4 KiB
//   / 128 KiB pieces;
// - PARALLEL_DIROPS: lookups need no per-directory lock;
// - INIT_EXT: flags2 exists (needed for OVER_IO_URING).
// Not asked: splice (one read()/write() per request is cheaper, and WRITE
// data is copied into the ring's pages anyway), writeback cache (disk files
// are direct_io).
constexpr uint64_t kWantedFlags =
    abi::kAsyncRead | abi::kAtomicOTrunc | abi::kBigWrites | abi::kAsyncDio |
    abi::kParallelDirops | abi::kMaxPages | abi::kInitExt;
constexpr uint32_t kPageSize = 4096;

}  // namespace

Session::Session(Handler* handler, const SessionOptions& options)
    : handler_(handler), options_(options) {
  limits_.max_write = options.max_write;
  limits_.max_read = options.max_write;
}

int Session::Process(const RawRequest& raw, ReplySink* sink, uint64_t slot) {
  if (raw.header == nullptr) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    return -EINVAL;
  }
  Request request;
  int decoded = DecodeRequest(raw, limits_, &request);
  if (ExpectsNoReply(raw.header->opcode)) {
    if (decoded < 0) {
      malformed_.fetch_add(1, std::memory_order_relaxed);
    } else if (request.opcode == abi::kForget) {
      handler_->Forget(request.nodeid, request.nlookup);
    } else if (request.opcode == abi::kBatchForget) {
      for (uint32_t i = 0; i < request.forget_count; ++i) {
        abi::fuse_forget_one one;
        std::memcpy(&one, request.forgets.data() + i * sizeof(one),
                    sizeof(one));
        handler_->Forget(one.nodeid, one.nlookup);
      }
    }
    // INTERRUPT is ignored: the interrupted request is answered normally
    // when its I/O completes, which never takes long.
    return 0;
  }
  Reply reply(sink, slot, request.unique);
  if (decoded == -ENOSYS) {
    reply.Error(ENOSYS);
    return 0;
  }
  if (decoded < 0) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    reply.Error(-decoded);
    return 0;
  }
  if (request.opcode == abi::kInit) {
    Init(request, std::move(reply));
    return 0;
  }
  if (!initialized()) {
    reply.Error(EIO);  // the kernel sends nothing before INIT's answer
    return 0;
  }
  Dispatch(request, std::move(reply));
  return 0;
}

int Session::ProcessClassic(std::span<const uint8_t> buffer, ReplySink* sink,
                            uint64_t slot) {
  RawRequest raw;
  int split = SplitClassic(buffer, &raw);
  if (split == 0 || raw.header == nullptr) return Process(raw, sink, slot);
  malformed_.fetch_add(1, std::memory_order_relaxed);
  if (!ExpectsNoReply(raw.header->opcode)) {
    Reply(sink, slot, raw.header->unique).Error(-split);
  }
  return 0;
}

void Session::Init(const Request& request, Reply reply) {
  const abi::fuse_init_in& in = request.init;
  if (initialized()) {
    reply.Error(EPROTO);  // a second INIT
    return;
  }
  if (in.major != abi::kKernelVersion) {
    LogInfo("the kernel speaks FUSE %u.%u; pvdisk needs 7.x", in.major,
            in.minor);
    reply.Error(EPROTO);
    return;
  }
  uint64_t offered = in.flags | (uint64_t{in.flags2} << 32);
  uint64_t wanted = kWantedFlags;
  if (options_.want_uring) wanted |= abi::kOverIoUring;
  negotiated_.kernel_minor = in.minor;
  negotiated_.kernel_flags = offered;
  negotiated_.flags = offered & wanted;
  negotiated_.max_write = options_.max_write;
  negotiated_.max_pages =
      (negotiated_.flags & abi::kMaxPages) ? options_.max_write / kPageSize : 0;

  abi::fuse_init_out out{};
  out.major = abi::kKernelVersion;
  out.minor = abi::kKernelMinorVersion;
  out.max_readahead = in.max_readahead;
  out.flags = static_cast<uint32_t>(negotiated_.flags);
  out.flags2 = static_cast<uint32_t>(negotiated_.flags >> 32);
  out.max_background = options_.max_background;
  out.congestion_threshold =
      static_cast<uint16_t>(options_.max_background * 3 / 4);
  out.max_write = options_.max_write;
  out.time_gran = 1;
  out.max_pages = static_cast<uint16_t>(negotiated_.max_pages);
  size_t size = in.minor < 23 ? abi::kInitOutCompat22Size : sizeof(out);
  initialized_.store(true, std::memory_order_release);
  // The kernel has processed the INIT reply when the write returns.
  reply.Bytes(&out, size);
  if (on_initialized_) on_initialized_();
}

void Session::Dispatch(const Request& request, Reply reply) {
  switch (request.opcode) {
    case abi::kLookup:
      return handler_->Lookup(request, std::move(reply));
    case abi::kGetattr:
      return handler_->Getattr(request, std::move(reply));
    case abi::kSetattr:
      return handler_->Setattr(request, std::move(reply));
    case abi::kOpen:
      return handler_->Open(request, std::move(reply));
    case abi::kRead:
      return handler_->Read(request, std::move(reply));
    case abi::kWrite:
      return handler_->Write(request, std::move(reply));
    case abi::kFsync:
      return handler_->Fsync(request, std::move(reply));
    case abi::kFlush:
      return handler_->Flush(request, std::move(reply));
    case abi::kRelease:
      return handler_->Release(request, std::move(reply));
    case abi::kOpendir:
      return handler_->Opendir(request, std::move(reply));
    case abi::kReaddir:
      return handler_->Readdir(request, std::move(reply));
    case abi::kReleasedir:
      return handler_->Releasedir(request, std::move(reply));
    case abi::kStatfs:
      return handler_->Statfs(request, std::move(reply));
    case abi::kFallocate:
      return handler_->Fallocate(request, std::move(reply));
    case abi::kDestroy:
      destroyed_.store(true, std::memory_order_release);
      return reply.Ok();
    default:
      return reply.Error(ENOSYS);
  }
}

}  // namespace pvdisk::fuse::protocol
