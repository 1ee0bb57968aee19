// io_uring specifics: the ring belongs to the thread that uses the engine, the
// depth limit, and clean shutdown with reads still armed.
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "io/engine_factory.h"
#include "io/flush_policy.h"
#include "io/io_engine.h"
#include "io/ring_lender.h"
#include "io/spin_policy.h"
#include "temp_dir.h"

namespace pvdisk::io::testing {
namespace {

class UringEngineTest : public EngineFixture, public ::testing::Test {
 protected:
  void SetUpWithDepth(uint32_t depth) {
    EngineOptions options;
    options.kind = EngineKind::kUring;
    options.depth = depth;
    SetUpEngine(options, skip_reason_);
  }
  std::string skip_reason_;
};

// Made (and told about its eventfd) on one thread, the control thread in
// pvdisk, and used on another, the backend thread: single-issuer rings must
// still work.
TEST_F(UringEngineTest, CreatedOnOneThreadUsedOnAnother) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 9).ok());
  std::thread backend([this, fd] {
    AlignedBuffer out(8192), in(8192);
    for (size_t i = 0; i < out.size(); ++i) {
      out.data()[i] = static_cast<char>(i);
    }
    std::vector<iovec> w = {{out.data(), 4096}, {out.data() + 4096, 4096}};
    EXPECT_EQ(Do(*engine_, Rw(IoOp::kWrite, 4096, w)), 8192);
    std::vector<iovec> r = {{in.data(), 8192}};
    EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, 4096, r)), 8192);
    EXPECT_EQ(in.str(), out.str());

    uint64_t one = 1;
    EXPECT_EQ(write(fd, &one, sizeof(one)), 8);
    std::vector<IoCompletion> wake;
    EXPECT_EQ(engine_->Run(/*wait=*/true, wake), 1);
    EXPECT_TRUE(!wake.empty() && wake[0].wake && wake[0].tag == 9);
    engine_.reset();  // destroyed on the thread that used it
  });
  backend.join();
  close(fd);
}

TEST_F(UringEngineTest, RefusesMoreThanDepth) {
  SetUpWithDepth(4);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  AlignedBuffer buffer(4096 * 5);
  std::vector<std::vector<iovec>> iovs(5);
  for (int i = 0; i < 5; ++i) {
    iovs[i] = {{buffer.data() + 4096 * i, 4096}};
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096 * i, iovs[i], i)), 0);
  }
  EXPECT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096 * 4, iovs[4], 4)), -EBUSY);
  EXPECT_EQ(engine_->inflight(), 4u);
  Collect(*engine_, 4);
  EXPECT_EQ(engine_->inflight(), 0u);
  // The slots are free again.
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 4096 * 4, iovs[4], 4)), 0);
  Collect(*engine_, 1);
}

TEST_F(UringEngineTest, DestroysPromptlyWithWakeReadArmed) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  int fd = eventfd(0, EFD_CLOEXEC);  // blocking, too
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(engine_->WatchWakeFd(fd, 1).ok());
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/false, out), 0);  // arms the read
  const auto start = std::chrono::steady_clock::now();
  engine_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500));
  // The cancelled read did not take the counter.
  uint64_t one = 1;
  EXPECT_EQ(write(fd, &one, sizeof(one)), 8);
  uint64_t counter = 0;
  EXPECT_EQ(read(fd, &counter, sizeof(counter)), 8);
  EXPECT_EQ(counter, 1u);
  close(fd);
}

TEST_F(UringEngineTest, WaitingWithNothingToWaitForReturns) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/true, out), 0);
}

// Fixed buffers: memory offered with OfferBuffers() is registered when the
// ring is set up (on the first Queue() or Run()), and a request naming it
// with buffer_index and one iovec inside it goes as READ_FIXED/WRITE_FIXED.
TEST_F(UringEngineTest, FixedBufferRequestsMoveTheRightBytes) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  AlignedBuffer buffer(64 * 1024);
  engine_->OfferBuffers({iovec{buffer.data(), buffer.size()}});
  EXPECT_FALSE(engine_->uses_fixed_buffers());  // no ring yet

  // Write 8 KiB from the middle of the buffer, with buffer_index 0.
  for (size_t i = 0; i < 8192; ++i) {
    buffer.data()[16384 + i] = static_cast<char>(i * 7 + 3);
  }
  const std::string written(buffer.data() + 16384, 8192);
  std::vector<iovec> out = {{buffer.data() + 16384, 8192}};
  IoRequest write = Rw(IoOp::kWrite, 4096 * 10, out, 1);
  write.buffer_index = 0;
  EXPECT_EQ(Do(*engine_, write), 8192);
  EXPECT_TRUE(engine_->uses_fixed_buffers());
  EXPECT_EQ(ReadFileRange(image_path_, 4096 * 10, 8192), written);

  // Read it back into another part of the same buffer.
  std::vector<iovec> in = {{buffer.data() + 40960, 8192}};
  IoRequest read = Rw(IoOp::kRead, 4096 * 10, in, 2);
  read.buffer_index = 0;
  EXPECT_EQ(Do(*engine_, read), 8192);
  EXPECT_EQ(std::string(buffer.data() + 40960, 8192), written);

  // A request naming the buffer but with two iovecs cannot be one fixed
  // transfer: it still works, the ordinary way.
  std::memset(buffer.data(), 0, 8192);
  std::vector<iovec> two = {{buffer.data(), 4096},
                            {buffer.data() + 4096, 4096}};
  IoRequest split = Rw(IoOp::kRead, 4096 * 10, two, 3);
  split.buffer_index = 0;
  EXPECT_EQ(Do(*engine_, split), 8192);
  EXPECT_EQ(std::string(buffer.data(), 8192), written);
  std::vector<iovec> two_out = {{buffer.data() + 40960, 4096},
                                {buffer.data() + 16384, 4096}};
  IoRequest split_write = Rw(IoOp::kWrite, 0, two_out, 4);
  split_write.buffer_index = 0;
  EXPECT_EQ(Do(*engine_, split_write), 8192);
  EXPECT_EQ(ReadFileRange(image_path_, 0, 4096), written.substr(0, 4096));
  EXPECT_EQ(ReadFileRange(image_path_, 4096, 4096), written.substr(0, 4096));

  // An index that names no offered buffer also goes the ordinary way.
  std::memset(buffer.data(), 0, 4096);
  std::vector<iovec> one = {{buffer.data(), 4096}};
  IoRequest unknown = Rw(IoOp::kRead, 4096 * 11, one, 5);
  unknown.buffer_index = 7;
  EXPECT_EQ(Do(*engine_, unknown), 4096);
  EXPECT_EQ(std::string(buffer.data(), 4096), written.substr(4096));
  EXPECT_TRUE(engine_->uses_fixed_buffers());
  EXPECT_EQ(engine_->inflight(), 0u);
}

// Evidence that a registered buffer really goes as a fixed transfer: the
// kernel checks the address against the registered range, so memory
// outside it (which breaks IoRequest's contract) fails with EFAULT instead
// of being read into.
TEST_F(UringEngineTest, FixedTransferIsCheckedAgainstTheRegisteredBuffer) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  AlignedBuffer registered(8192), elsewhere(4096);
  engine_->OfferBuffers({iovec{registered.data(), registered.size()}});
  std::vector<iovec> outside = {{elsewhere.data(), 4096}};
  IoRequest read = Rw(IoOp::kRead, 0, outside);
  read.buffer_index = 0;
  EXPECT_EQ(Do(*engine_, read), -EFAULT);
  ASSERT_TRUE(engine_->uses_fixed_buffers());
  // The same memory without buffer_index is fine.
  EXPECT_EQ(Do(*engine_, Rw(IoOp::kRead, 0, outside)), 4096);
}

TEST_F(UringEngineTest, FixedBuffersAreRegisteredByTheFirstRun) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  AlignedBuffer first(8192), second(4096);
  engine_->OfferBuffers(
      {iovec{first.data(), first.size()}, iovec{second.data(), second.size()}});
  EXPECT_FALSE(engine_->uses_fixed_buffers());
  std::vector<IoCompletion> out;
  EXPECT_EQ(engine_->Run(/*wait=*/false, out), 0);
  EXPECT_TRUE(engine_->uses_fixed_buffers());
  // Buffer 1 works as well as buffer 0.
  std::memset(second.data(), 'Z', second.size());
  std::vector<iovec> iov = {{second.data(), second.size()}};
  IoRequest write = Rw(IoOp::kWrite, 0, iov);
  write.buffer_index = 1;
  EXPECT_EQ(Do(*engine_, write), 4096);
  EXPECT_EQ(ReadFileRange(image_path_, 0, 4096), std::string(4096, 'Z'));
}

// Without OfferBuffers() nothing is registered, and buffer_index is ignored.
TEST_F(UringEngineTest, NoOfferedBuffersMeansNoFixedBuffers) {
  SetUpWithDepth(8);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  AlignedBuffer buffer(4096);
  std::memset(buffer.data(), 'Q', buffer.size());
  std::vector<iovec> iov = {{buffer.data(), buffer.size()}};
  IoRequest write = Rw(IoOp::kWrite, 8192, iov);
  write.buffer_index = 0;
  EXPECT_EQ(Do(*engine_, write), 4096);
  EXPECT_FALSE(engine_->uses_fixed_buffers());
  EXPECT_EQ(ReadFileRange(image_path_, 8192, 4096), std::string(4096, 'Q'));
}

// The fault decorator passes the offer on and reports the inner engine's
// registration.
TEST(UringFaultEngineTest, FaultWrapperForwardsFixedBuffers) {
  TempDir dir;
  const std::string path = dir.File("disk.img");
  ASSERT_TRUE(CreateImage(path, kImageBytes, false).ok());
  auto image = ImageFile::Open(path, /*read_only=*/false, /*want_direct=*/true);
  ASSERT_TRUE(image.ok()) << image.status();
  EngineOptions options;
  options.kind = EngineKind::kUring;
  options.depth = 8;
  options.fault = FaultRange{0, 8};
  auto engine = CreateEngine(options, **image);
  if (!engine.ok() && IoUringUnavailable(engine.status())) {
    GTEST_SKIP() << engine.status();
  }
  ASSERT_TRUE(engine.ok()) << engine.status();
  AlignedBuffer buffer(8192);
  (*engine)->OfferBuffers({iovec{buffer.data(), buffer.size()}});
  EXPECT_FALSE((*engine)->uses_fixed_buffers());
  std::memset(buffer.data(), 'F', 4096);
  std::vector<iovec> iov = {{buffer.data(), 4096}};
  IoRequest write = Rw(IoOp::kWrite, 8192, iov);
  write.buffer_index = 0;
  EXPECT_EQ(Do(**engine, write), 4096);
  EXPECT_TRUE((*engine)->uses_fixed_buffers());
  IoRequest faulty = Rw(IoOp::kWrite, 0, iov, 2);
  faulty.buffer_index = 0;
  EXPECT_EQ(Do(**engine, faulty), -EIO);
  EXPECT_EQ(ReadFileRange(path, 8192, 4096), std::string(4096, 'F'));
}

// Which ops' completions wait for a kernel thread on the submitting CPU
// (io/spin_policy.h): io_uring's fsync and fallocate always run on an io-wq
// worker; reads and writes of an O_DIRECT image do not.
TEST(SpinPolicyTest, FlushesAndFallocatesNeedAKernelThread) {
  EXPECT_FALSE(CompletionNeedsKernelThread(IoOp::kRead));
  EXPECT_FALSE(CompletionNeedsKernelThread(IoOp::kWrite));
  EXPECT_TRUE(CompletionNeedsKernelThread(IoOp::kFlush));
  EXPECT_TRUE(CompletionNeedsKernelThread(IoOp::kDiscard));
  EXPECT_TRUE(CompletionNeedsKernelThread(IoOp::kWriteZeroes));
}

// The engine says a spin could catch its completions while only reads and
// writes are in flight, and not while a flush or a discard is, until Run()
// has returned that request's completion.
TEST_F(UringEngineTest, NoSpinWhileAFlushOrDiscardIsInFlight) {
  SetUpWithDepth(4);
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  EXPECT_TRUE(engine_->completes_while_spinning());  // nothing in flight
  AlignedBuffer buffer(8192);
  std::memset(buffer.data(), 'S', buffer.size());
  std::vector<iovec> w = {{buffer.data(), 4096}};
  std::vector<iovec> r = {{buffer.data() + 4096, 4096}};
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kWrite, 0, w, 1)), 0);
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kRead, 8192, r, 2)), 0);
  EXPECT_TRUE(engine_->completes_while_spinning());
  Collect(*engine_, 2);

  for (IoOp op : {IoOp::kFlush, IoOp::kDiscard, IoOp::kWriteZeroes}) {
    SCOPED_TRACE(static_cast<int>(op));
    ASSERT_EQ(engine_->Queue(Rw(IoOp::kWrite, 0, w, 3)), 0);
    ASSERT_EQ(
        engine_->Queue(Range(op, 65536, op == IoOp::kFlush ? 0 : 4096, 4)), 0);
    EXPECT_FALSE(engine_->completes_while_spinning());
    // Until the flush's own completion has been returned, whatever else
    // completes first.
    bool returned = false;
    for (size_t got = 0; got < 2;) {
      std::vector<IoCompletion> batch;
      ASSERT_GE(engine_->Run(/*wait=*/true, batch), 0);
      for (const IoCompletion& c : batch) {
        // The write, or the flush (0) or discard (its length).
        EXPECT_EQ(c.result, c.tag == 4 && op == IoOp::kFlush ? 0 : 4096);
        returned |= c.tag == 4;
        ++got;
      }
      EXPECT_EQ(engine_->completes_while_spinning(), returned);
    }
    EXPECT_TRUE(engine_->completes_while_spinning());
    EXPECT_EQ(engine_->inflight(), 0u);
  }
}

// A flush runs on the calling thread only on a borrowed ring that carries
// nothing else: no I/O of this engine's or of another borrower's in flight,
// no request open but the flush's own, no completion waiting
// (io/flush_policy.h).
TEST(FlushPolicyTest, OnTheCallingThreadOnlyWhenTheRingCarriesNothingElse) {
  const FlushContext idle{.borrowed = true,
                          .engine_inflight = 0,
                          .ring_inflight = 0,
                          .requests_open = 1,
                          .completions_waiting = false};
  EXPECT_TRUE(FlushOnCallingThread(idle));
  FlushContext at = idle;
  at.requests_open = 0;  // an owner that does not count its requests
  EXPECT_TRUE(FlushOnCallingThread(at));

  at = idle;
  at.borrowed = false;  // a ring of the engine's own: never
  EXPECT_FALSE(FlushOnCallingThread(at));
  at = idle;
  at.engine_inflight = 1;
  at.ring_inflight = 1;
  EXPECT_FALSE(FlushOnCallingThread(at));
  at = idle;
  at.ring_inflight = 1;  // another disk's I/O on the same ring
  EXPECT_FALSE(FlushOnCallingThread(at));
  at = idle;
  at.requests_open = 2;  // another FUSE request taken, not answered
  EXPECT_FALSE(FlushOnCallingThread(at));
  at = idle;
  at.completions_waiting = true;  // a new request or a completion posted
  EXPECT_FALSE(FlushOnCallingThread(at));
}

// A ring of the test's own that it lends, as a FUSE queue lends its ring
// to the inline placement's engines: several sinks, the requests "open"
// as the test sets them, and the ring's own posted completions.
class LentRing final : public RingLender {
 public:
  LentRing() { ok_ = io_uring_queue_init(16, &ring_, 0) == 0; }
  ~LentRing() override {
    if (ok_) io_uring_queue_exit(&ring_);
  }
  bool ok() const { return ok_; }
  io_uring* ring() override { return &ring_; }
  uint64_t Lend(CqeSink* sink) override {
    sinks_.push_back(sink);
    return uint64_t{sinks_.size()} << kSinkBits;
  }
  void Unlend(uint64_t tag) override {
    sinks_[(tag >> kSinkBits) - 1] = nullptr;
  }
  int AddFixedBuffers(const std::vector<iovec>&) override { return -1; }
  int FixedBufferFor(const void*, size_t) override { return -1; }
  bool HasWaitingCompletions() override {
    return io_uring_cq_ready(&ring_) > 0;
  }
  uint32_t BorrowedInFlight() override {
    uint32_t total = 0;
    for (const CqeSink* sink : sinks_) {
      if (sink != nullptr) total += sink->InFlight();
    }
    return total;
  }
  uint32_t RequestsOpen() override { return requests_open_; }
  void set_requests_open(uint32_t open) { requests_open_ = open; }
  // Submits what the engines queued, waits for one CQE and routes every
  // one there is (a CQE of no sink's is dropped).
  void SubmitWaitAndRoute() {
    io_uring_cqe* cqe = nullptr;
    ASSERT_GE(io_uring_submit_and_wait(&ring_, 1), 0);
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      const uint64_t index = cqe->user_data >> kSinkBits;
      if (index >= 1 && index <= sinks_.size() && sinks_[index - 1]) {
        sinks_[index - 1]->OnCqe(cqe->user_data, cqe->res);
      }
    }
    io_uring_cq_advance(&ring_, seen);
  }

 private:
  io_uring ring_{};
  bool ok_ = false;
  std::vector<CqeSink*> sinks_;
  uint32_t requests_open_ = 0;
};

class LentUringEngineTest : public EngineFixture, public ::testing::Test {
 protected:
  void SetUp() override {
    if (!owner_.ok()) GTEST_SKIP() << "io_uring unavailable";
    EngineOptions options;
    options.kind = EngineKind::kUring;
    options.depth = 4;
    options.ring_lender = &owner_;
    SetUpEngine(options, skip_reason_);
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  }
  // The engine goes before the ring, as the inline driver releases it.
  void TearDown() override { engine_.reset(); }

  LentRing owner_;
  std::string skip_reason_;
};

// On a borrowed ring, a flush with nothing else in flight is done by the
// time Queue() returns (no SQE for the ring's owner to submit), and the
// next Run() answers it; a flush queued behind a write goes to the ring and
// completes there, after the write it covers.
TEST_F(LentUringEngineTest, ALoneFlushRunsOnTheCallingThread) {
  ASSERT_EQ(engine_->Queue(Range(IoOp::kFlush, 0, 0, 7)), 0);
  EXPECT_EQ(io_uring_sq_ready(owner_.ring()), 0u)
      << "the flush went to io_uring";
  std::vector<IoCompletion> done;
  EXPECT_EQ(engine_->Run(/*wait=*/false, done), 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 7u);
  EXPECT_EQ(done[0].result, 0);
  EXPECT_EQ(engine_->inflight(), 0u);

  AlignedBuffer buffer(4096);
  std::memset(buffer.data(), 'L', buffer.size());
  std::vector<iovec> w = {{buffer.data(), 4096}};
  ASSERT_EQ(engine_->Queue(Rw(IoOp::kWrite, 4096, w, 8)), 0);
  ASSERT_EQ(engine_->Queue(Range(IoOp::kFlush, 0, 0, 9)), 0);
  EXPECT_EQ(io_uring_sq_ready(owner_.ring()), 2u)
      << "a flush behind a write in flight must go to the ring";
  done.clear();
  for (int turns = 0; done.size() < 2 && turns < 100; ++turns) {
    owner_.SubmitWaitAndRoute();
    ASSERT_GE(engine_->Run(/*wait=*/false, done), 0);
  }
  ASSERT_EQ(done.size(), 2u);
  for (const IoCompletion& c : done) {
    EXPECT_EQ(c.result, c.tag == 8 ? 4096 : 0) << c.tag;
  }
  EXPECT_EQ(ReadFileRange(image_path_, 4096, 4096), std::string(4096, 'L'));
}

// A flush on a ring that carries anything else goes to the ring, not to
// the calling thread: another disk's engine on the same ring with a write
// in flight, another request open, a completion waiting to be reaped. Each
// time it completes there, and the other disk's data reads back; with the
// ring idle again and only the flush's own request open it runs on the
// thread.
TEST_F(LentUringEngineTest, AFlushRunsOnTheThreadOnlyWhenTheRingIsIdle) {
  // A second disk of the same mount: its own image, the same ring.
  const std::string other_path = dir_.File("other.img");
  ASSERT_TRUE(CreateImage(other_path, kImageBytes, false).ok());
  auto other_image = ImageFile::Open(other_path, /*read_only=*/false,
                                     /*want_direct=*/true);
  ASSERT_TRUE(other_image.ok()) << other_image.status();
  EngineOptions options;
  options.kind = EngineKind::kUring;
  options.depth = 4;
  options.ring_lender = &owner_;
  auto made = CreateEngine(options, **other_image);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<IoEngine> other = *std::move(made);

  // Queues a flush on engine_ and, if it went to the ring, runs the ring
  // until it and whatever else is in flight have completed. Returns the
  // flush's SQEs on the ring (0: it ran on the thread) and checks results.
  std::vector<IoCompletion> other_done;
  auto flush = [&](uint64_t tag) -> unsigned {
    const unsigned before = io_uring_sq_ready(owner_.ring());
    EXPECT_EQ(engine_->Queue(Range(IoOp::kFlush, 0, 0, tag)), 0);
    const unsigned queued = io_uring_sq_ready(owner_.ring()) - before;
    std::vector<IoCompletion> done;
    for (int turns = 0; turns < 100; ++turns) {
      EXPECT_GE(engine_->Run(/*wait=*/false, done), 0);
      EXPECT_GE(other->Run(/*wait=*/false, other_done), 0);
      if (!done.empty() && other->inflight() == 0) break;
      owner_.SubmitWaitAndRoute();
    }
    EXPECT_EQ(done.size(), 1u);
    if (!done.empty()) {
      EXPECT_EQ(done[0].tag, tag);
      EXPECT_EQ(done[0].result, 0);
    }
    return queued;
  };

  owner_.set_requests_open(1);  // the flush's own FUSE request
  EXPECT_EQ(flush(1), 0u) << "a flush on an idle ring goes to the thread";

  AlignedBuffer buffer(4096);
  std::memset(buffer.data(), 'O', buffer.size());
  std::vector<iovec> w = {{buffer.data(), 4096}};
  ASSERT_EQ(other->Queue(Rw(IoOp::kWrite, 8192, w, 5)), 0);
  // Each input alone: the requests open say nothing here (the write's may
  // be held by another queue thread).
  EXPECT_EQ(flush(2), 1u)
      << "a flush with another disk's write in flight on the ring ran on "
         "the thread";
  ASSERT_EQ(other_done.size(), 1u);
  EXPECT_EQ(other_done[0].tag, 5u);
  EXPECT_EQ(other_done[0].result, 4096);
  EXPECT_EQ(ReadFileRange(other_path, 8192, 4096), std::string(4096, 'O'));

  // Nothing in flight, but another request open (taken, not yet queued).
  owner_.set_requests_open(2);
  EXPECT_EQ(flush(3), 1u) << "a flush with another request open ran on the "
                             "thread";

  // Nothing in flight, one request open, but a completion waiting: a NOP
  // of no sink's, completed and not reaped.
  owner_.set_requests_open(1);
  io_uring_sqe* nop = io_uring_get_sqe(owner_.ring());
  ASSERT_NE(nop, nullptr);
  io_uring_prep_nop(nop);
  io_uring_sqe_set_data64(nop, 0);
  ASSERT_EQ(io_uring_submit(owner_.ring()), 1);
  io_uring_cqe* cqe = nullptr;
  ASSERT_EQ(io_uring_wait_cqe(owner_.ring(), &cqe), 0);
  EXPECT_EQ(flush(4), 1u) << "a flush with a completion waiting on the ring "
                             "ran on the thread";

  EXPECT_EQ(flush(5), 0u) << "the ring is idle again";
  other.reset();  // before the ring, as the inline driver releases it
}

}  // namespace
}  // namespace pvdisk::io::testing
