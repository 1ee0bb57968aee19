#include "io/failing_engine.h"

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "io/engine_decorator.h"

namespace pvdisk::io {
namespace {

class FailingEngine final : public EngineDecorator {
 public:
  FailingEngine(std::unique_ptr<IoEngine> inner,
                std::shared_ptr<EngineFailTrigger> trigger)
      : EngineDecorator(std::move(inner), "fails as a whole once (test fault)"),
        trigger_(std::move(trigger)) {}

  int Queue(const IoRequest& request) override {
    if (trigger_->CountSubmission()) failed_ = true;
    return inner().Queue(request);
  }
  int Run(bool wait, std::vector<IoCompletion>& out) override {
    if (failed_) return -EIO;
    return inner().Run(wait, out);
  }
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    if (failed_) return -EIO;
    return inner().RunUntil(deadline_ns, out);
  }

 private:
  std::shared_ptr<EngineFailTrigger> trigger_;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithEngineFailure(
    std::unique_ptr<IoEngine> inner,
    std::shared_ptr<EngineFailTrigger> trigger) {
  return std::make_unique<FailingEngine>(std::move(inner), std::move(trigger));
}

}  // namespace pvdisk::io
