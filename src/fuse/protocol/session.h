// Session: one FUSE connection's protocol state. It negotiates INIT, then
// decodes every request a channel hands it and dispatches it to the Handler
// (or answers it itself: DESTROY, INTERRUPT, unknown opcodes, malformed
// requests). Channels call Process() from any number of threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "fuse/protocol/handler.h"
#include "fuse/protocol/reply.h"
#include "fuse/protocol/request.h"

namespace pvdisk::fuse::protocol {

// The largest request payload: max_write 1 MiB means max_pages 256.
inline constexpr uint32_t kMaxWrite = 1 << 20;
// Far above the kernel's default of 12, which alone caps an iodepth-32 job
// at 12 requests in flight (reference/fuse.md §2.1). u16 on the wire.
inline constexpr uint16_t kMaxBackground = 4096;

struct SessionOptions {
  uint32_t max_write = kMaxWrite;
  uint16_t max_background = kMaxBackground;
  // Ask for FUSE-over-io_uring in the INIT reply (the uring channel).
  bool want_uring = false;
};

// What INIT settled.
struct Negotiated {
  uint32_t kernel_minor = 0;
  uint64_t kernel_flags = 0;  // what the kernel offered (flags | flags2<<32)
  uint64_t flags = 0;         // what we enabled
  uint32_t max_write = 0;
  uint32_t max_pages = 0;
  bool uring() const { return (flags & abi::kOverIoUring) != 0; }
};

class Session {
 public:
  Session(Handler* handler, const SessionOptions& options);

  // Serves one raw request (see request.h); the reply goes to `sink` with
  // `slot`. Returns 0 if the request was served or answered with an error,
  // or -EINVAL if it was too malformed to answer (no complete header).
  int Process(const RawRequest& raw, ReplySink* sink, uint64_t slot);
  // The same for a request as read() from /dev/fuse (see SplitClassic).
  int ProcessClassic(std::span<const uint8_t> buffer, ReplySink* sink,
                     uint64_t slot);

  // Runs once, right after the INIT reply has been sent (the uring channel
  // registers its queues then).
  void OnInitialized(std::function<void()> callback) {
    on_initialized_ = std::move(callback);
  }

  bool initialized() const {
    return initialized_.load(std::memory_order_acquire);
  }
  // Valid once initialized().
  const Negotiated& negotiated() const { return negotiated_; }
  // Requests answered with an error because they were malformed.
  uint64_t malformed() const {
    return malformed_.load(std::memory_order_relaxed);
  }
  bool destroyed() const { return destroyed_.load(std::memory_order_acquire); }

 private:
  void Init(const Request& request, Reply reply);
  void Dispatch(const Request& request, Reply reply);

  Handler* const handler_;
  const SessionOptions options_;
  DecodeLimits limits_;
  Negotiated negotiated_;
  std::function<void()> on_initialized_;
  std::atomic<bool> initialized_{false};
  std::atomic<bool> destroyed_{false};
  std::atomic<uint64_t> malformed_{0};
};

}  // namespace pvdisk::fuse::protocol
