#include "io/hanging_engine.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kSectorSize = 512;

class HangingEngine final : public IoEngine {
 public:
  HangingEngine(std::unique_ptr<IoEngine> inner, uint64_t sector)
      : inner_(std::move(inner)),
        sector_(sector),
        mode_(absl::StrCat(std::string(inner_->mode()), "; I/O on sector ",
                           sector, " never completes (test fault)")) {}

  std::string_view name() const override { return inner_->name(); }
  std::string_view mode() const override { return mode_; }

  int Queue(const IoRequest& request) override {
    if (request.op != IoOp::kFlush && request.length > 0 &&
        request.offset / kSectorSize <= sector_ &&
        sector_ <
            (request.offset + request.length + kSectorSize - 1) / kSectorSize) {
      ++held_;
      return 0;
    }
    return inner_->Queue(request);
  }
  absl::Status WatchWakeFd(int fd, uint64_t tag) override {
    return inner_->WatchWakeFd(fd, tag);
  }
  int Run(bool wait, std::vector<IoCompletion>& out) override {
    return inner_->Run(wait, out);
  }
  uint32_t inflight() const override { return inner_->inflight() + held_; }
  void OfferBuffers(std::vector<iovec> buffers) override {
    inner_->OfferBuffers(std::move(buffers));
  }
  bool uses_fixed_buffers() const override {
    return inner_->uses_fixed_buffers();
  }

 private:
  std::unique_ptr<IoEngine> inner_;
  const uint64_t sector_;
  const std::string mode_;
  uint32_t held_ = 0;  // requests accepted that will never complete
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithHang(std::unique_ptr<IoEngine> inner,
                                       uint64_t sector) {
  return std::make_unique<HangingEngine>(std::move(inner), sector);
}

}  // namespace pvdisk::io
