// Fuzzes pvdisk's FUSE protocol layer (src/fuse/protocol/): a Session fed
// any sequence of requests in either channel's shape, as /dev/fuse delivers
// them (one buffer, cut by SplitClassic) or as a FUSE-over-io_uring ring
// entry holds them (a header, a 128-byte op_in area and a payload buffer of
// its own, each allocated to its exact size so that ASan sees a read past
// any of them). The kernel is trusted, but the protocol layer promises to
// validate every length and offset it is given; this checks that promise:
// - no crash, no read outside the buffers given, no undefined behaviour;
// - Process() returns -EINVAL only for a classic buffer shorter than a
//   header, and 0 otherwise;
// - FORGET, BATCH_FORGET and INTERRUPT are never answered; every other
//   request is answered exactly once, with its own unique, now or when the
//   handler answers the Reply it kept (a Reply dropped unanswered answers
//   EIO), with an error that is 0 or a positive errno and data only with 0;
// - before INIT every request but INIT is answered EIO; a second INIT
//   EPROTO; INIT enables no flag the kernel did not offer or pvdisk did not
//   want, and answers with the struct size the kernel's minor expects;
// - what the handler is given holds what request.h says: a READ or READDIR
//   of 1 to max_read bytes at an offset up to INT64_MAX, a WRITE whose data
//   lies in the payload and fits max_write and INT64_MAX, a LOOKUP name that
//   is non-empty and NUL-free, a FALLOCATE range within INT64_MAX; and one
//   Forget() call for a well-formed FORGET, one per entry of a well-formed
//   BATCH_FORGET, none for a malformed one;
// - AddDirent() packs a READDIR reply of the size asked without overflowing
//   it (names from earlier LOOKUPs, then "." until full).
//
// Input (little-endian, tests/fuzz/make_seeds.py writes seeds):
//   u8 options: bit 0 want_uring; u8 max_write = 1 << (value % 21)
//   then steps, each a u8 action % 4 and its operands:
//   0 classic: u16 length, then that many bytes (the whole request);
//   1 uring:   40 header bytes, u8 n, n bytes of the 128-byte op area (the
//              rest zero), u16 payload length, payload;
//   2 answer:  every kept Reply is answered (u8: 0 in order, 1 reversed);
//   3 drop:    every kept Reply is destroyed unanswered.
// The handler answers a request by its unique % 4: 0 an error (ENOENT),
// 1 success with bytes (READDIR: dirents), 2 keep the Reply for a later
// step, 3 success through the sink's payload buffer.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fuse/protocol/abi.h"
#include "fuse/protocol/handler.h"
#include "fuse/protocol/reply.h"
#include "fuse/protocol/request.h"
#include "fuse/protocol/session.h"
#include "fuzz_input.h"

namespace {

namespace abi = pvdisk::fuse::abi;
using pvdisk::fuse::protocol::AddDirent;
using pvdisk::fuse::protocol::Handler;
using pvdisk::fuse::protocol::RawRequest;
using pvdisk::fuse::protocol::Reply;
using pvdisk::fuse::protocol::ReplySink;
using pvdisk::fuse::protocol::Request;
using pvdisk::fuse::protocol::Session;
using pvdisk::fuse::protocol::SessionOptions;

// The largest payload a uring step brings, and the sink's payload buffer.
constexpr size_t kPayloadBuffer = 4096;
constexpr uint64_t kInt64Max = uint64_t{INT64_MAX};

// Where Touch() leaves its sum, so that the compiler keeps the reads.
volatile uint64_t touched;

// Reads every byte of `bytes`, so that ASan checks the whole span.
void Touch(std::span<const uint8_t> bytes) {
  uint64_t sum = 0;
  for (uint8_t byte : bytes) sum += byte;
  touched = touched + sum;
}

// A heap copy of exactly `bytes`: nothing readable past its end.
std::unique_ptr<uint8_t[]> ExactCopy(const std::vector<uint8_t>& bytes) {
  auto copy = std::make_unique<uint8_t[]>(bytes.size());
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  return copy;
}

// Records every reply and checks each against the contract above.
class CheckingSink final : public ReplySink {
 public:
  struct Sent {
    uint64_t unique;
    int error;
    size_t bytes;
  };

  void Send(uint64_t slot, uint64_t unique, int error,
            std::span<const iovec> payload) override {
    FUZZ_CHECK(slot == kSlot, "a reply for another slot");
    FUZZ_CHECK(error >= 0 && error < 4096,
               "a reply error that is not 0 or a positive errno");
    size_t bytes = 0;
    for (const iovec& piece : payload) {
      FUZZ_CHECK(piece.iov_base != nullptr || piece.iov_len == 0,
                 "a reply piece without memory");
      Touch({static_cast<const uint8_t*>(piece.iov_base), piece.iov_len});
      bytes += piece.iov_len;
    }
    FUZZ_CHECK(error == 0 || bytes == 0, "an error reply with data");
    sent_.push_back({unique, error, bytes});
  }

  std::span<uint8_t> PayloadBuffer(uint64_t slot) override {
    FUZZ_CHECK(slot == kSlot, "a payload buffer for another slot");
    return payload_;
  }

  const std::vector<Sent>& sent() const { return sent_; }

  static constexpr uint64_t kSlot = 7;

 private:
  uint8_t payload_[kPayloadBuffer] = {};
  std::vector<Sent> sent_;
};

class CheckingHandler final : public Handler {
 public:
  explicit CheckingHandler(uint32_t max_write) : max_write_(max_write) {}

  void Lookup(const Request& request, Reply reply) override {
    FUZZ_CHECK(!request.name.empty(), "an empty LOOKUP name");
    FUZZ_CHECK(request.name.find('\0') == std::string_view::npos,
               "a LOOKUP name with a NUL inside");
    Touch({reinterpret_cast<const uint8_t*>(request.name.data()),
           request.name.size()});
    if (names_.size() < 4) names_.emplace_back(request.name);
    Answer(request, std::move(reply), abi::fuse_entry_out{});
  }
  void Getattr(const Request& request, Reply reply) override {
    Answer(request, std::move(reply), abi::fuse_attr_out{});
  }
  void Setattr(const Request& request, Reply reply) override {
    FUZZ_CHECK(request.fh == request.setattr.fh, "SETATTR's fh not its own");
    Answer(request, std::move(reply), abi::fuse_attr_out{});
  }
  void Open(const Request& request, Reply reply) override {
    Answer(request, std::move(reply), abi::fuse_open_out{});
  }
  void Read(const Request& request, Reply reply) override {
    CheckReadSize(request);
    Answer(request, std::move(reply), uint64_t{0});  // some bytes of data
  }
  void Write(const Request& request, Reply reply) override {
    FUZZ_CHECK(request.data.size() <= max_write_, "a WRITE past max_write");
    FUZZ_CHECK(request.offset <= kInt64Max - request.data.size(),
               "a WRITE that ends past INT64_MAX");
    Touch(request.data);
    Answer(request, std::move(reply), abi::fuse_write_out{});
  }
  void Fsync(const Request& request, Reply reply) override {
    Answer(request, std::move(reply), 0);
  }
  void Flush(const Request& request, Reply reply) override {
    Answer(request, std::move(reply), 0);
  }
  void Release(const Request& request, Reply reply) override {
    Answer(request, std::move(reply), 0);
  }
  void Readdir(const Request& request, Reply reply) override {
    CheckReadSize(request);
    if (request.unique % 4 != 1) {
      return Answer(request, std::move(reply), 0);
    }
    // What a filesystem does: as many entries as fit in the size asked.
    std::vector<uint8_t> buffer(request.size);
    size_t used = 0;
    uint64_t next = request.offset;
    for (const std::string& name : names_) {
      if (!AddDirent(buffer, &used, name, 2, S_IFREG, ++next)) break;
    }
    while (AddDirent(buffer, &used, ".", 1, S_IFDIR, ++next)) {
    }
    FUZZ_CHECK(used <= buffer.size(), "dirents past the READDIR size");
    FUZZ_CHECK(used % 8 == 0, "a dirent not padded to 8 bytes");
    reply.Bytes(buffer.data(), used);
  }
  void Statfs(const Request& request, Reply reply) override {
    Answer(request, std::move(reply), abi::fuse_statfs_out{});
  }
  void Fallocate(const Request& request, Reply reply) override {
    FUZZ_CHECK(request.offset <= kInt64Max && request.length <= kInt64Max &&
                   request.offset + request.length <= kInt64Max,
               "a FALLOCATE range past INT64_MAX");
    Answer(request, std::move(reply), 0);
  }
  void Forget(uint64_t, uint64_t) override { ++forgets_; }

  uint64_t forgets() const { return forgets_; }
  std::vector<Reply>& kept() { return kept_; }

 private:
  void CheckReadSize(const Request& request) {
    FUZZ_CHECK(request.size >= 1 && request.size <= max_write_,
               "a READ or READDIR of 0 or more than max_read bytes");
    FUZZ_CHECK(request.offset <= kInt64Max, "a READ offset past INT64_MAX");
  }

  // Answers by the unique's low bits (see the file comment).
  template <typename T>
  void Answer(const Request& request, Reply reply, const T& value) {
    switch (request.unique % 4) {
      case 0:
        return reply.Error(ENOENT);
      case 1:
        return reply.Bytes(&value, sizeof(value));
      case 2:
        kept_.push_back(std::move(reply));
        return;
      default: {
        std::span<uint8_t> buffer = reply.PayloadBuffer();
        FUZZ_CHECK(buffer.size() >= sizeof(value), "a short payload buffer");
        std::memcpy(buffer.data(), &value, sizeof(value));
        iovec piece{buffer.data(), sizeof(value)};
        return reply.Data({&piece, 1});
      }
    }
  }

  const uint32_t max_write_;
  std::vector<std::string> names_;
  std::vector<Reply> kept_;
  uint64_t forgets_ = 0;
};

// The oracle's own list, on purpose not request.h's ExpectsNoReply().
bool NeverAnswered(uint32_t opcode) {
  return opcode == abi::kForget || opcode == abi::kBatchForget ||
         opcode == abi::kInterrupt;
}

// What one request was, to check what the Session did with it.
struct Step {
  bool has_header = false;
  abi::fuse_in_header header{};
  // Forget() calls a FORGET or BATCH_FORGET must make: 0 if malformed.
  uint64_t forget_calls = 0;
  // INIT's fields, if the op area held them.
  abi::fuse_init_in init{};
  size_t init_bytes = 0;
};

class Fuzzer {
 public:
  Fuzzer(bool want_uring, uint32_t max_write)
      : handler_(max_write),
        session_(&handler_, Options(want_uring, max_write)),
        want_uring_(want_uring) {
    session_.OnInitialized([this] { ++initialized_calls_; });
  }

  void Classic(const std::vector<uint8_t>& bytes) {
    Step step;
    if (bytes.size() >= sizeof(abi::fuse_in_header)) {
      step.has_header = true;
      std::memcpy(&step.header, bytes.data(), sizeof(step.header));
      DescribeClassic(bytes, &step);
    }
    auto buffer = ExactCopy(bytes);
    Run(step, [&] {
      return session_.ProcessClassic({buffer.get(), bytes.size()}, &sink_,
                                     CheckingSink::kSlot);
    });
  }

  void Uring(const std::vector<uint8_t>& header,
             const std::vector<uint8_t>& op_in,
             const std::vector<uint8_t>& payload) {
    Step step;
    step.has_header = true;
    std::memcpy(&step.header, header.data(), sizeof(step.header));
    Describe(op_in, payload, &step);
    auto header_copy = ExactCopy(header);
    auto op_copy = ExactCopy(op_in);
    auto payload_copy = ExactCopy(payload);
    RawRequest raw;
    raw.header =
        reinterpret_cast<const abi::fuse_in_header*>(header_copy.get());
    raw.op_in = {op_copy.get(), op_in.size()};
    raw.payload = {payload_copy.get(), payload.size()};
    Run(step,
        [&] { return session_.Process(raw, &sink_, CheckingSink::kSlot); });
  }

  void AnswerKept(bool reversed) {
    std::vector<Reply> kept = std::move(handler_.kept());
    handler_.kept().clear();
    if (reversed) std::reverse(kept.begin(), kept.end());
    size_t before = sink_.sent().size();
    for (Reply& reply : kept) reply.Ok();
    FUZZ_CHECK(sink_.sent().size() == before + kept.size(),
               "a kept reply not sent exactly once");
    for (size_t i = 0; i < kept.size(); ++i) {
      FUZZ_CHECK(sink_.sent()[before + i].unique == kept[i].unique(),
                 "a kept reply sent for another request");
    }
  }

  void DropKept() {
    size_t count = handler_.kept().size();
    size_t before = sink_.sent().size();
    handler_.kept().clear();  // each answers EIO as it goes
    FUZZ_CHECK(sink_.sent().size() == before + count,
               "a dropped reply not answered");
    for (size_t i = before; i < sink_.sent().size(); ++i) {
      FUZZ_CHECK(sink_.sent()[i].error == EIO, "a dropped reply not EIO");
    }
  }

 private:
  static SessionOptions Options(bool want_uring, uint32_t max_write) {
    SessionOptions options;
    options.want_uring = want_uring;
    options.max_write = max_write;
    return options;
  }

  // A /dev/fuse buffer's op area and payload, cut as the kernel lays them
  // out (what request.h's SplitClassic must agree with), for Describe().
  static void DescribeClassic(const std::vector<uint8_t>& bytes, Step* step) {
    std::span<const uint8_t> body(bytes.data() + sizeof(step->header),
                                  bytes.size() - sizeof(step->header));
    const size_t extensions = size_t{step->header.total_extlen} * 8;
    if (step->header.len != bytes.size() || extensions > body.size()) return;
    body = body.first(body.size() - extensions);
    size_t op_size = 0;
    if (step->header.opcode == abi::kForget) {
      op_size = sizeof(abi::fuse_forget_in);
    } else if (step->header.opcode == abi::kBatchForget) {
      op_size = sizeof(abi::fuse_batch_forget_in);
    } else if (step->header.opcode == abi::kInit) {
      op_size = sizeof(abi::fuse_init_in);
    }
    op_size = std::min(op_size, body.size());
    Describe(body.first(op_size), body.subspan(op_size), step);
  }

  // Notes what the checks need from a request's op area and payload
  // (both as the kernel laid them out: not called for a classic buffer
  // whose len or extensions do not fit).
  static void Describe(std::span<const uint8_t> op_in,
                       std::span<const uint8_t> payload, Step* step) {
    if (step->header.opcode == abi::kForget &&
        op_in.size() >= sizeof(abi::fuse_forget_in)) {
      step->forget_calls = 1;
    }
    if (step->header.opcode == abi::kBatchForget &&
        op_in.size() >= sizeof(abi::fuse_batch_forget_in)) {
      abi::fuse_batch_forget_in in;
      std::memcpy(&in, op_in.data(), sizeof(in));
      if (payload.size() / sizeof(abi::fuse_forget_one) >= in.count) {
        step->forget_calls = in.count;
      }
    }
    if (step->header.opcode == abi::kInit) {
      step->init_bytes = std::min(op_in.size(), sizeof(abi::fuse_init_in));
      std::memcpy(&step->init, op_in.data(), step->init_bytes);
    }
  }

  // Processes one request and checks its answer.
  template <typename Call>
  void Run(const Step& step, Call call) {
    const bool was_initialized = session_.initialized();
    const uint64_t forgets_before = handler_.forgets();
    const size_t kept_before = handler_.kept().size();
    const size_t before = sink_.sent().size();
    int result = call();
    if (!step.has_header) {
      FUZZ_CHECK(result == -EINVAL, "a headerless request not refused");
      FUZZ_CHECK(sink_.sent().size() == before,
                 "a headerless request answered");
      return;
    }
    FUZZ_CHECK(result == 0, "a request with a header not served");
    const uint32_t opcode = step.header.opcode;
    const size_t answers = sink_.sent().size() - before;
    const size_t kept = handler_.kept().size() - kept_before;
    if (NeverAnswered(opcode)) {
      FUZZ_CHECK(answers == 0 && kept == 0, "a FORGET or INTERRUPT answered");
      FUZZ_CHECK(handler_.forgets() - forgets_before == step.forget_calls,
                 "Forget() calls are not the FORGET's entries");
      return;
    }
    FUZZ_CHECK(answers + kept == 1, "a request not answered exactly once");
    if (kept == 1) {
      FUZZ_CHECK(handler_.kept().back().unique() == step.header.unique,
                 "a kept reply for another request");
      return;
    }
    const CheckingSink::Sent& sent = sink_.sent().back();
    FUZZ_CHECK(sent.unique == step.header.unique, "a reply to another unique");
    if (opcode == abi::kInit) {
      CheckInit(step, was_initialized, sent);
    } else if (!was_initialized) {
      FUZZ_CHECK(sent.error != 0, "a request served before INIT");
    }
    if (opcode == abi::kDestroy && was_initialized && sent.error == 0) {
      FUZZ_CHECK(session_.destroyed(), "DESTROY answered but not noted");
    }
  }

  void CheckInit(const Step& step, bool was_initialized,
                 const CheckingSink::Sent& sent) {
    if (was_initialized) {
      FUZZ_CHECK(sent.error != 0, "a second INIT accepted");
      return;
    }
    if (sent.error != 0) {
      FUZZ_CHECK(!session_.initialized(), "a refused INIT initialized");
      return;
    }
    FUZZ_CHECK(step.init_bytes >= abi::kInitInCompatSize,
               "an INIT without its fields accepted");
    FUZZ_CHECK(step.init.major == abi::kKernelVersion,
               "an INIT of another major accepted");
    FUZZ_CHECK(session_.initialized() && initialized_calls_ == 1,
               "INIT answered but the session not initialized once");
    const size_t expected = step.init.minor < 23 ? abi::kInitOutCompat22Size
                                                 : sizeof(abi::fuse_init_out);
    FUZZ_CHECK(sent.bytes == expected, "an INIT reply of the wrong size");
    uint64_t offered = step.init.flags;  // flags2 counts only with INIT_EXT
    if (step.init.flags & abi::kInitExt) {
      offered |= uint64_t{step.init.flags2} << 32;
    }
    const auto& negotiated = session_.negotiated();
    FUZZ_CHECK((negotiated.flags & ~offered) == 0,
               "INIT enabled a flag the kernel did not offer");
    FUZZ_CHECK(!negotiated.uring() || want_uring_,
               "INIT enabled io_uring that was not wanted");
  }

  // First, so that it outlives the Replies the handler keeps.
  CheckingSink sink_;
  CheckingHandler handler_;
  Session session_;
  const bool want_uring_;
  int initialized_calls_ = 0;
};

std::vector<uint8_t> Take(pvdisk::fuzz::FuzzInput& input, size_t n) {
  std::vector<uint8_t> bytes(n);
  input.Bytes(bytes.data(), n);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pvdisk::fuzz::FuzzInput input(data, size);
  const bool want_uring = (input.U8() & 1) != 0;
  const uint32_t max_write = uint32_t{1} << (input.U8() % 21);
  Fuzzer fuzzer(want_uring, max_write);
  while (!input.empty()) {
    switch (input.U8() % 4) {
      case 0:
        fuzzer.Classic(Take(input, input.U16()));
        break;
      case 1: {
        std::vector<uint8_t> header = Take(input, sizeof(abi::fuse_in_header));
        std::vector<uint8_t> op_in = Take(input, input.U8() % 129);
        op_in.resize(abi::kUringOpInOutSize);  // the entry's whole op area
        size_t length = std::min<size_t>(input.U16(), kPayloadBuffer);
        fuzzer.Uring(header, op_in, Take(input, length));
        break;
      }
      case 2:
        fuzzer.AnswerKept(input.U8() & 1);
        break;
      default:
        fuzzer.DropKept();
        break;
    }
  }
  fuzzer.DropKept();
  return 0;
}
