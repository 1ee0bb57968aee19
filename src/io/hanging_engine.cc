#include "io/hanging_engine.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/engine_decorator.h"

namespace pvdisk::io {
namespace {

constexpr uint64_t kSectorSize = 512;

class HangingEngine final : public EngineDecorator {
 public:
  HangingEngine(std::unique_ptr<IoEngine> inner, uint64_t sector)
      : EngineDecorator(std::move(inner),
                        absl::StrCat("I/O on sector ", sector,
                                     " never completes (test fault)")),
        sector_(sector) {}

  int Queue(const IoRequest& request) override {
    if (request.op != IoOp::kFlush && request.length > 0 &&
        request.offset / kSectorSize <= sector_ &&
        sector_ <
            (request.offset + request.length + kSectorSize - 1) / kSectorSize) {
      ++held_;
      return 0;
    }
    return inner().Queue(request);
  }
  uint32_t inflight() const override { return inner().inflight() + held_; }

 private:
  const uint64_t sector_;
  uint32_t held_ = 0;  // requests accepted that will never complete
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithHang(std::unique_ptr<IoEngine> inner,
                                       uint64_t sector) {
  return std::make_unique<HangingEngine>(std::move(inner), sector);
}

}  // namespace pvdisk::io
