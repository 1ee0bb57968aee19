// Session: INIT negotiation and dispatch, with hand-built requests; every
// malformed request gets an error reply (or, without a whole header, none)
// and never reaches the handler.
#include "fuse/protocol/session.h"

#include <cerrno>
#include <thread>

#include "gtest/gtest.h"
#include "wire_builder.h"

namespace pvdisk::fuse::protocol {
namespace {

using testing::AsBytes;
using testing::BuildRequest;
using testing::PayloadAs;
using testing::RecordingSink;
using testing::SentReply;

// Answers READ with `size` bytes of 'r' from another thread, counts the
// rest.
class TestHandler final : public Handler {
 public:
  void Read(const Request& request, Reply reply) override {
    ++reads;
    last_offset = request.offset;
    std::thread([reply = std::move(reply), size = request.size]() mutable {
      std::string data(size, 'r');
      reply.Bytes(data.data(), data.size());
    }).join();
  }
  void Forget(uint64_t nodeid, uint64_t nlookup) override {
    forgotten += nlookup;
    last_forgotten = nodeid;
  }
  int reads = 0;
  uint64_t last_offset = 0;
  uint64_t forgotten = 0;
  uint64_t last_forgotten = 0;
};

abi::fuse_init_in KernelInit(uint32_t minor = 42) {
  abi::fuse_init_in in{};
  in.major = 7;
  in.minor = minor;
  in.max_readahead = 128 * 1024;
  in.flags = 0xffffffffu;  // offers everything
  in.flags2 = 0xffffffffu;
  return in;
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_.OnInitialized([this] { ++initialized_calls_; });
  }

  SentReply Serve(const std::vector<uint8_t>& bytes) {
    size_t before = sink_.replies().size();
    EXPECT_EQ(session_.ProcessClassic(bytes, &sink_, 77), 0);
    auto replies = sink_.replies();
    EXPECT_EQ(replies.size(), before + 1) << "expected exactly one reply";
    return replies.empty() ? SentReply() : replies.back();
  }
  void Init() {
    SentReply reply =
        Serve(BuildRequest(abi::kInit, 1, 0, AsBytes(KernelInit()), {}));
    ASSERT_EQ(reply.error, 0);
  }

  TestHandler handler_;
  SessionOptions options_;
  Session session_{&handler_, options_};
  RecordingSink sink_;
  int initialized_calls_ = 0;
};

TEST_F(SessionTest, RequestBeforeInitGetsEio) {
  abi::fuse_read_in in{};
  in.size = 4096;
  SentReply reply = Serve(BuildRequest(abi::kRead, 5, 16, AsBytes(in), {}));
  EXPECT_EQ(reply.unique, 5u);
  EXPECT_EQ(reply.error, EIO);
  EXPECT_EQ(handler_.reads, 0);
}

TEST_F(SessionTest, InitNegotiatesWhatLibfuse314CouldNot) {
  SentReply reply =
      Serve(BuildRequest(abi::kInit, 1, 0, AsBytes(KernelInit()), {}));
  ASSERT_EQ(reply.error, 0);
  ASSERT_EQ(reply.payload.size(), sizeof(abi::fuse_init_out));
  auto out = PayloadAs<abi::fuse_init_out>(reply);
  EXPECT_EQ(out.major, 7u);
  EXPECT_EQ(out.minor, abi::kKernelMinorVersion);
  EXPECT_EQ(out.max_write, kMaxWrite);
  EXPECT_EQ(out.max_pages, 256u);
  EXPECT_EQ(out.max_background, kMaxBackground);
  EXPECT_TRUE(out.flags & abi::kMaxPages);
  EXPECT_TRUE(out.flags & abi::kAsyncDio);
  EXPECT_TRUE(out.flags & abi::kInitExt);
  EXPECT_FALSE(out.flags & abi::kSpliceRead);
  EXPECT_FALSE(out.flags & abi::kWritebackCache);
  // The classic channel does not ask for io_uring.
  EXPECT_EQ(out.flags2 & (abi::kOverIoUring >> 32), 0u);
  EXPECT_TRUE(session_.initialized());
  EXPECT_FALSE(session_.negotiated().uring());
  EXPECT_EQ(initialized_calls_, 1);
}

TEST(SessionInitTest, UringIsAskedForOnlyWhenWantedAndOffered) {
  TestHandler handler;
  RecordingSink sink;
  SessionOptions options;
  options.want_uring = true;
  Session wanted(&handler, options);
  ASSERT_EQ(
      wanted.ProcessClassic(
          BuildRequest(abi::kInit, 1, 0, AsBytes(KernelInit()), {}), &sink, 0),
      0);
  auto out = PayloadAs<abi::fuse_init_out>(sink.replies().back());
  EXPECT_NE(out.flags2 & (abi::kOverIoUring >> 32), 0u);
  EXPECT_TRUE(wanted.negotiated().uring());

  // A kernel that does not offer it (flags2 without bit 41).
  Session not_offered(&handler, options);
  abi::fuse_init_in in = KernelInit();
  in.flags2 = 0;
  ASSERT_EQ(not_offered.ProcessClassic(
                BuildRequest(abi::kInit, 1, 0, AsBytes(in), {}), &sink, 0),
            0);
  EXPECT_FALSE(not_offered.negotiated().uring());
}

TEST_F(SessionTest, OldKernelGetsTheOldInitReplySize) {
  SentReply reply =
      Serve(BuildRequest(abi::kInit, 1, 0, AsBytes(KernelInit(22)), {}));
  EXPECT_EQ(reply.error, 0);
  EXPECT_EQ(reply.payload.size(), abi::kInitOutCompat22Size);
}

TEST_F(SessionTest, WrongMajorAndSecondInitAreRefused) {
  abi::fuse_init_in in = KernelInit();
  in.major = 8;
  EXPECT_EQ(Serve(BuildRequest(abi::kInit, 1, 0, AsBytes(in), {})).error,
            EPROTO);
  EXPECT_FALSE(session_.initialized());
  Init();
  EXPECT_EQ(
      Serve(BuildRequest(abi::kInit, 2, 0, AsBytes(KernelInit()), {})).error,
      EPROTO);
  EXPECT_EQ(initialized_calls_, 1);
}

TEST_F(SessionTest, ReadIsDispatchedAndAnsweredFromAnotherThread) {
  Init();
  abi::fuse_read_in in{};
  in.offset = 4096;
  in.size = 512;
  SentReply reply = Serve(BuildRequest(abi::kRead, 9, 16, AsBytes(in), {}));
  EXPECT_EQ(handler_.reads, 1);
  EXPECT_EQ(handler_.last_offset, 4096u);
  EXPECT_EQ(reply.unique, 9u);
  EXPECT_EQ(reply.slot, 77u);  // back to where it came from
  EXPECT_EQ(reply.error, 0);
  EXPECT_EQ(reply.payload, std::string(512, 'r'));
}

TEST_F(SessionTest, MalformedRequestsGetAnErrorAndNeverReachTheHandler) {
  Init();
  abi::fuse_read_in zero{};
  zero.size = 0;
  abi::fuse_read_in huge{};
  huge.size = kMaxWrite + 1;
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    int error;
  };
  std::vector<Case> cases = {
      {"READ of 0 bytes", BuildRequest(abi::kRead, 10, 16, AsBytes(zero), {}),
       EINVAL},
      {"READ past max_read",
       BuildRequest(abi::kRead, 11, 16, AsBytes(huge), {}), EINVAL},
      {"READ cut short",
       BuildRequest(abi::kRead, 12, 16, AsBytes(zero).first(7), {}), EINVAL},
      {"len past the buffer",
       BuildRequest(abi::kRead, 13, 16, AsBytes(zero), {}, 4000), EINVAL},
      {"len short of the buffer",
       BuildRequest(abi::kRead, 14, 16, AsBytes(zero), {}, 41), EINVAL},
      {"unknown opcode", BuildRequest(7777, 15, 16, {}, {}), ENOSYS},
      {"unserved opcode", BuildRequest(abi::kSymlink, 16, 1, {}, {}), ENOSYS},
      {"name without NUL",
       BuildRequest(abi::kLookup, 17, 1, {}, AsBytes(std::string("x"))),
       EINVAL},
  };
  for (const Case& c : cases) {
    SentReply reply = Serve(c.bytes);
    EXPECT_EQ(reply.error, c.error) << c.what;
    EXPECT_EQ(
        reply.unique,
        reinterpret_cast<const abi::fuse_in_header*>(c.bytes.data())->unique)
        << c.what;
    EXPECT_TRUE(reply.payload.empty()) << c.what;
  }
  EXPECT_EQ(handler_.reads, 0);
  EXPECT_GE(session_.malformed(), 6u);
}

TEST_F(SessionTest, ShortHeaderCannotBeAnsweredAndIsReported) {
  Init();
  size_t before = sink_.replies().size();
  std::vector<uint8_t> bytes(12, 0xff);
  EXPECT_EQ(session_.ProcessClassic(bytes, &sink_, 0), -EINVAL);
  EXPECT_EQ(sink_.replies().size(), before);
  EXPECT_EQ(session_.malformed(), 1u);
}

TEST_F(SessionTest, ForgetsAndInterruptsGetNoReply) {
  Init();
  size_t before = sink_.replies().size();
  abi::fuse_forget_in forget{3};
  EXPECT_EQ(
      session_.ProcessClassic(
          BuildRequest(abi::kForget, 20, 16, AsBytes(forget), {}), &sink_, 0),
      0);
  EXPECT_EQ(handler_.forgotten, 3u);
  EXPECT_EQ(handler_.last_forgotten, 16u);
  abi::fuse_batch_forget_in batch{2, 0};
  abi::fuse_forget_one ones[2] = {{17, 1}, {18, 2}};
  std::span<const uint8_t> ones_bytes(reinterpret_cast<const uint8_t*>(ones),
                                      sizeof(ones));
  EXPECT_EQ(session_.ProcessClassic(BuildRequest(abi::kBatchForget, 21, 0,
                                                 AsBytes(batch), ones_bytes),
                                    &sink_, 0),
            0);
  EXPECT_EQ(handler_.forgotten, 6u);
  EXPECT_EQ(handler_.last_forgotten, 18u);
  // A batch that claims more entries than it has forgets nothing.
  batch.count = 50;
  EXPECT_EQ(session_.ProcessClassic(BuildRequest(abi::kBatchForget, 22, 0,
                                                 AsBytes(batch), ones_bytes),
                                    &sink_, 0),
            0);
  EXPECT_EQ(handler_.forgotten, 6u);
  abi::fuse_interrupt_in interrupt{9};
  EXPECT_EQ(session_.ProcessClassic(
                BuildRequest(abi::kInterrupt, 23, 0, AsBytes(interrupt), {}),
                &sink_, 0),
            0);
  EXPECT_EQ(sink_.replies().size(), before);
}

// Found by fuzz.fuse_session: a /dev/fuse buffer whose len disagrees with
// its size was answered with EINVAL even for a FORGET, BATCH_FORGET or
// INTERRUPT, which no one waits for. They are counted, never answered.
TEST_F(SessionTest, MalformedForgetsAndInterruptsGetNoReply) {
  Init();
  size_t before = sink_.replies().size();
  abi::fuse_forget_in forget{3};
  abi::fuse_batch_forget_in batch{1, 0};
  abi::fuse_interrupt_in interrupt{9};
  const std::vector<uint8_t> lying[] = {
      BuildRequest(abi::kForget, 20, 16, AsBytes(forget), {}, /*len=*/3),
      BuildRequest(abi::kBatchForget, 21, 0, AsBytes(batch), {}, 4000),
      BuildRequest(abi::kInterrupt, 22, 0, AsBytes(interrupt), {}, 41)};
  for (const std::vector<uint8_t>& bytes : lying) {
    EXPECT_EQ(session_.ProcessClassic(bytes, &sink_, 0), 0);
  }
  EXPECT_EQ(sink_.replies().size(), before);
  EXPECT_EQ(session_.malformed(), 3u);
  EXPECT_EQ(handler_.forgotten, 0u);
}

TEST_F(SessionTest, DestroyIsAnswered) {
  Init();
  SentReply reply = Serve(BuildRequest(abi::kDestroy, 30, 0, {}, {}));
  EXPECT_EQ(reply.error, 0);
  EXPECT_TRUE(session_.destroyed());
}

TEST_F(SessionTest, DefaultHandlerAnswersEnosysForWhatItDoesNotServe) {
  Init();
  abi::fuse_getattr_in getattr{};
  EXPECT_EQ(
      Serve(BuildRequest(abi::kGetattr, 31, 1, AsBytes(getattr), {})).error,
      ENOSYS);
  EXPECT_EQ(Serve(BuildRequest(abi::kStatfs, 32, 1, {}, {})).error, ENOSYS);
}

}  // namespace
}  // namespace pvdisk::fuse::protocol
