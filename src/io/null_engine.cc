#include "io/null_engine.h"

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "io/immediate_engine.h"

namespace pvdisk::io {
namespace {

class NullEngine final : public ImmediateEngine {
 public:
  NullEngine(std::vector<uint64_t> file_bytes, uint32_t capacity)
      : ImmediateEngine(std::move(file_bytes), capacity) {}

  std::string_view name() const override { return "null"; }
  std::string_view mode() const override { return "no I/O"; }

 private:
  int64_t Perform(const IoRequest& request) override {
    switch (request.op) {
      case IoOp::kRead:
        for (int i = 0; i < request.iov_count; ++i) {
          std::memset(request.iov[i].iov_base, 0, request.iov[i].iov_len);
        }
        return static_cast<int64_t>(request.length);
      case IoOp::kFlush:
        return 0;
      case IoOp::kWrite:
      case IoOp::kDiscard:
      case IoOp::kWriteZeroes:
        return static_cast<int64_t>(request.length);
    }
    return -EINVAL;
  }
};

}  // namespace

std::unique_ptr<IoEngine> CreateNullEngine(const EngineFiles& files,
                                           const EngineOptions& options) {
  return std::make_unique<NullEngine>(FileSizes(files),
                                      options.depth + options.extra_ios);
}

}  // namespace pvdisk::io
