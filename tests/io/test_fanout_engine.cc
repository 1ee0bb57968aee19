// PVDISK_TEST_FAULT=fanout (io/test_fault.h): a decorator that serves every
// read and write with two I/Os of the engine below it, issued one after the
// other: first a 512-byte read of sector 0 of the request's file (as a format
// reads its metadata), then the request itself; the request completes with
// the second. Its Run() counts each first-read completion it turns into the
// second I/O as progress without a completion (io_engine.h), so a loop that
// took such a round for idle would leave the second I/O unsubmitted or its
// completion unreaped.
//
// Test code: no feature of pvdisk. The I/O library compiles it in so that a
// real mount can use it (see src/io/CMakeLists.txt).
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "io/engine_decorator.h"
#include "io/io_engine.h"
#include "io/test_fault.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kSectorBytes = 512;
// Inner tags: the slot index, and which of its I/Os it is.
constexpr uint64_t kFirstBit = uint64_t{1} << 62;  // the sector-0 read
constexpr uint64_t kPassBit = uint64_t{1} << 61;   // flush, discard, ...
constexpr uint64_t kIndexMask = (uint64_t{1} << 32) - 1;

class TestFanoutEngine final : public EngineDecorator {
 public:
  TestFanoutEngine(std::unique_ptr<IoEngine> inner, uint32_t capacity)
      : EngineDecorator(std::move(inner),
                        "test fan-out: a sector-0 read before each I/O"),
        slots_(capacity),
        // 512-byte buffers, 4 KiB aligned as a whole: what O_DIRECT takes.
        sectors_(static_cast<uint8_t*>(std::aligned_alloc(
            4096, (size_t{capacity} * kSectorBytes + 4095) / 4096 * 4096))) {
    free_.reserve(capacity);
    for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
    reaped_.reserve(capacity);
  }
  ~TestFanoutEngine() override { std::free(sectors_); }

  int Queue(const IoRequest& request) override {
    if (free_.empty()) return -EBUSY;
    const uint32_t index = free_.back();
    Slot& slot = slots_[index];
    slot.request = request;
    IoRequest first = request;
    if (request.op == IoOp::kRead || request.op == IoOp::kWrite) {
      slot.sector =
          iovec{sectors_ + size_t{index} * kSectorBytes, kSectorBytes};
      first.op = IoOp::kRead;
      first.offset = 0;
      first.length = kSectorBytes;
      first.iov = &slot.sector;
      first.iov_count = 1;
      first.buffer_index = -1;
      first.tag = kFirstBit | index;
    } else {
      first.tag = kPassBit | index;  // flush, discard: one I/O as it is
    }
    if (int rc = inner().Queue(first); rc < 0) return rc;
    free_.pop_back();
    ++inflight_;
    return 0;
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    reaped_.clear();
    const int rc = inner().Run(wait, reaped_);
    if (rc < 0) return rc;
    int events = 0;
    for (const IoCompletion& completion : reaped_) {
      if (completion.wake) {
        out.push_back(completion);
        ++events;
      } else if (completion.tag & kFirstBit) {
        events += OnFirst(static_cast<uint32_t>(completion.tag & kIndexMask),
                          completion.result, out);
      } else {
        Finish(static_cast<uint32_t>(completion.tag & kIndexMask),
               completion.result, out);
        ++events;
      }
    }
    return events;
  }

  uint32_t inflight() const override { return inflight_; }

 private:
  struct Slot {
    IoRequest request;
    iovec sector{};
  };

  // The sector-0 read of slot `index` finished: issue the request itself.
  // One event either way: progress (the second I/O is queued, no
  // completion) or the request's failure.
  int OnFirst(uint32_t index, int64_t result, std::vector<IoCompletion>& out) {
    if (result < 0) {
      Finish(index, result, out);
      return 1;
    }
    IoRequest second = slots_[index].request;
    second.tag = index;
    if (int rc = inner().Queue(second); rc < 0) {
      Finish(index, rc, out);
      return 1;
    }
    return 1;  // progress without a completion
  }

  void Finish(uint32_t index, int64_t result, std::vector<IoCompletion>& out) {
    out.push_back(IoCompletion{slots_[index].request.tag, result, false});
    free_.push_back(index);
    --inflight_;
  }

  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  uint8_t* const sectors_;
  std::vector<IoCompletion> reaped_;  // the inner engine's, per Run()
  uint32_t inflight_ = 0;
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithTestFanout(std::unique_ptr<IoEngine> inner,
                                             uint32_t capacity) {
  return std::make_unique<TestFanoutEngine>(std::move(inner), capacity);
}

}  // namespace pvdisk::io
