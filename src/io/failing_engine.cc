#include "io/failing_engine.h"

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pvdisk::io {
namespace {

class FailingEngine final : public IoEngine {
 public:
  FailingEngine(std::unique_ptr<IoEngine> inner,
                std::shared_ptr<EngineFailTrigger> trigger)
      : inner_(std::move(inner)),
        trigger_(std::move(trigger)),
        mode_(absl::StrCat(std::string(inner_->mode()),
                           "; fails as a whole once (test fault)")) {}

  std::string_view name() const override { return inner_->name(); }
  std::string_view mode() const override { return mode_; }

  int Queue(const IoRequest& request) override {
    if (trigger_->CountSubmission()) failed_ = true;
    return inner_->Queue(request);
  }
  absl::Status WatchWakeFd(int fd, uint64_t tag) override {
    return inner_->WatchWakeFd(fd, tag);
  }
  int Run(bool wait, std::vector<IoCompletion>& out) override {
    if (failed_) return -EIO;
    return inner_->Run(wait, out);
  }
  uint32_t inflight() const override { return inner_->inflight(); }
  void OfferBuffers(std::vector<iovec> buffers) override {
    inner_->OfferBuffers(std::move(buffers));
  }
  bool uses_fixed_buffers() const override {
    return inner_->uses_fixed_buffers();
  }

 private:
  std::unique_ptr<IoEngine> inner_;
  std::shared_ptr<EngineFailTrigger> trigger_;
  const std::string mode_;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithEngineFailure(
    std::unique_ptr<IoEngine> inner,
    std::shared_ptr<EngineFailTrigger> trigger) {
  return std::make_unique<FailingEngine>(std::move(inner), std::move(trigger));
}

}  // namespace pvdisk::io
