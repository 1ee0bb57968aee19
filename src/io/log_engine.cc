#include "io/log_engine.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/engine_decorator.h"

namespace pvdisk::io {
namespace {

class LogEngine final : public EngineDecorator {
 public:
  LogEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<WriteLog> log)
      : EngineDecorator(std::move(inner),
                        absl::StrCat("write log ", log->path())),
        log_(std::move(log)) {}

  int Queue(const IoRequest& request) override {
    if (request.op == IoOp::kRead) return inner().Queue(request);
    // The caller's tags name its requests in flight: one per tag.
    pending_[request.tag] = request;
    const int rc = inner().Queue(request);
    if (rc < 0) pending_.erase(request.tag);
    return rc;
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    const size_t first = out.size();
    const int handled = inner().Run(wait, out);
    Log(first, out);
    return handled;
  }
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    const size_t first = out.size();
    const int handled = inner().RunUntil(deadline_ns, out);
    Log(first, out);
    return handled;
  }

 private:
  // Appends the logged requests among out[first..] in their order there.
  void Log(size_t first, const std::vector<IoCompletion>& out) {
    if (pending_.empty()) return;
    for (size_t i = first; i < out.size(); ++i) {
      if (out[i].wake) continue;
      auto it = pending_.find(out[i].tag);
      if (it == pending_.end()) continue;
      const IoRequest& request = it->second;
      if (out[i].result >= 0) {
        switch (request.op) {
          case IoOp::kWrite:
            log_->AppendWrite(request.offset, request.iov, request.iov_count,
                              request.length);
            break;
          case IoOp::kDiscard:
          case IoOp::kWriteZeroes:
            log_->AppendDiscard(request.offset, request.length);
            break;
          case IoOp::kFlush:
            log_->AppendFlush();
            break;
          case IoOp::kRead:
            break;
        }
      }
      pending_.erase(it);
    }
  }

  const std::shared_ptr<WriteLog> log_;
  std::unordered_map<uint64_t, IoRequest> pending_;  // by the caller's tag
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithWriteLog(std::unique_ptr<IoEngine> inner,
                                           std::shared_ptr<WriteLog> log) {
  return std::make_unique<LogEngine>(std::move(inner), std::move(log));
}

}  // namespace pvdisk::io
