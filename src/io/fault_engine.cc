#include "io/fault_engine.h"

#include <algorithm>
#include <cerrno>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/engine_decorator.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kSectorBytes = 512;
constexpr uint64_t kMaxBytes = std::numeric_limits<uint64_t>::max();

uint64_t SaturatingSectorsToBytes(uint64_t sectors) {
  return sectors > kMaxBytes / kSectorBytes ? kMaxBytes
                                            : sectors * kSectorBytes;
}

class FaultEngine final : public EngineDecorator {
 public:
  FaultEngine(std::unique_ptr<IoEngine> inner, FaultRange range)
      : EngineDecorator(std::move(inner),
                        absl::StrCat("EIO on sectors ", range.first_sector, "+",
                                     range.sector_count)),
        begin_(SaturatingSectorsToBytes(range.first_sector)),
        end_(begin_ + std::min(SaturatingSectorsToBytes(range.sector_count),
                               kMaxBytes - begin_)) {}

  int Queue(const IoRequest& request) override {
    if (request.op != IoOp::kFlush && Overlaps(request)) {
      faults_.push_back(IoCompletion{request.tag, -EIO, false});
      return 0;
    }
    return inner().Queue(request);
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    return WithFaults(inner().Run(wait && faults_.empty(), out), out);
  }
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    return WithFaults(faults_.empty() ? inner().RunUntil(deadline_ns, out)
                                      : inner().Run(false, out),
                      out);
  }

  uint32_t inflight() const override {
    return inner().inflight() + static_cast<uint32_t>(faults_.size());
  }

 private:
  // Appends the failed requests to what inner's Run returned (`appended`).
  // Failed requests are completions already available, so callers never
  // let inner block while some are waiting to be returned.
  int WithFaults(int appended, std::vector<IoCompletion>& out) {
    if (appended < 0 && faults_.empty()) return appended;
    if (appended < 0) appended = 0;
    out.insert(out.end(), faults_.begin(), faults_.end());
    appended += static_cast<int>(faults_.size());
    faults_.clear();
    return appended;
  }

  bool Overlaps(const IoRequest& request) const {
    if (request.length == 0) return false;
    const uint64_t last = request.offset + std::min(request.length - 1,
                                                    kMaxBytes - request.offset);
    return request.offset < end_ && last >= begin_;
  }

  const uint64_t begin_;              // first faulty byte
  const uint64_t end_;                // one past the last faulty byte
  std::vector<IoCompletion> faults_;  // -EIO completions not yet returned
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithFaults(std::unique_ptr<IoEngine> inner,
                                         FaultRange range) {
  return std::make_unique<FaultEngine>(std::move(inner), range);
}

}  // namespace pvdisk::io
