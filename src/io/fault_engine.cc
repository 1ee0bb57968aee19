#include "io/fault_engine.h"

#include <algorithm>
#include <cerrno>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kSectorBytes = 512;
constexpr uint64_t kMaxBytes = std::numeric_limits<uint64_t>::max();

uint64_t SaturatingSectorsToBytes(uint64_t sectors) {
  return sectors > kMaxBytes / kSectorBytes ? kMaxBytes
                                            : sectors * kSectorBytes;
}

class FaultEngine final : public IoEngine {
 public:
  FaultEngine(std::unique_ptr<IoEngine> inner, FaultRange range)
      : inner_(std::move(inner)),
        begin_(SaturatingSectorsToBytes(range.first_sector)),
        end_(begin_ + std::min(SaturatingSectorsToBytes(range.sector_count),
                               kMaxBytes - begin_)),
        mode_(absl::StrCat(std::string(inner_->mode()), "; EIO on sectors ",
                           range.first_sector, "+", range.sector_count)) {}

  std::string_view name() const override { return inner_->name(); }
  std::string_view mode() const override { return mode_; }

  int Queue(const IoRequest& request) override {
    if (request.op != IoOp::kFlush && Overlaps(request)) {
      faults_.push_back(IoCompletion{request.tag, -EIO, false});
      return 0;
    }
    return inner_->Queue(request);
  }

  absl::Status WatchWakeFd(int fd, uint64_t tag) override {
    return inner_->WatchWakeFd(fd, tag);
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    // Failed requests are completions already available: never block inner
    // while some are waiting to be returned.
    int appended = inner_->Run(wait && faults_.empty(), out);
    if (appended < 0 && faults_.empty()) return appended;
    if (appended < 0) appended = 0;
    out.insert(out.end(), faults_.begin(), faults_.end());
    appended += static_cast<int>(faults_.size());
    faults_.clear();
    return appended;
  }

  uint32_t inflight() const override {
    return inner_->inflight() + static_cast<uint32_t>(faults_.size());
  }
  void OfferBuffers(std::vector<iovec> buffers) override {
    inner_->OfferBuffers(std::move(buffers));
  }
  bool uses_fixed_buffers() const override {
    return inner_->uses_fixed_buffers();
  }

 private:
  bool Overlaps(const IoRequest& request) const {
    if (request.length == 0) return false;
    const uint64_t last = request.offset + std::min(request.length - 1,
                                                    kMaxBytes - request.offset);
    return request.offset < end_ && last >= begin_;
  }

  std::unique_ptr<IoEngine> inner_;
  const uint64_t begin_;  // first faulty byte
  const uint64_t end_;    // one past the last faulty byte
  const std::string mode_;
  std::vector<IoCompletion> faults_;  // -EIO completions not yet returned
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithFaults(std::unique_ptr<IoEngine> inner,
                                         FaultRange range) {
  return std::make_unique<FaultEngine>(std::move(inner), range);
}

}  // namespace pvdisk::io
