#include "io/volatile_cache_engine.h"

#include <cerrno>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/engine_decorator.h"

namespace pvdisk::io {
namespace {

class VolatileCacheEngine final : public EngineDecorator {
 public:
  VolatileCacheEngine(std::unique_ptr<IoEngine> inner,
                      std::shared_ptr<VolatileCache> cache)
      : EngineDecorator(std::move(inner),
                        absl::StrCat("volatile write cache of ",
                                     cache->limit_bytes() >> 20, " MiB")),
        cache_(std::move(cache)) {}

  int Queue(const IoRequest& request) override {
    if (cache_->cut()) return Complete(request.tag, -EIO);
    // The cache is the disk's top file's: the read-only layers below a
    // format's top file (IoRequest::file > 0) are read as they are.
    if (request.file != 0) return inner().Queue(request);
    switch (request.op) {
      case IoOp::kWrite: {
        const int rc = cache_->Write(request.offset, request.iov,
                                     request.iov_count, request.length);
        return Complete(request.tag,
                        rc < 0 ? rc : static_cast<int64_t>(request.length));
      }
      case IoOp::kFlush:
        return Complete(request.tag, cache_->Flush());
      case IoOp::kDiscard:
      case IoOp::kWriteZeroes:
        if (int rc = cache_->WriteOutBeforeDiscard(); rc < 0) {
          return Complete(request.tag, rc);
        }
        return inner().Queue(request);
      case IoOp::kRead:
        break;
    }
    cache_->OverlayFor(request.offset, request.length, &overlay_);
    if (overlay_.empty()) return inner().Queue(request);
    // The caller's tags name its requests in flight: one read per tag.
    if (const int rc = inner().Queue(request); rc < 0) return rc;
    reads_[request.tag] =
        Read{request.offset, request.iov, request.iov_count, overlay_};
    return 0;
  }

  int Run(bool wait, std::vector<IoCompletion>& out) override {
    const size_t first = out.size();
    return Finish(inner().Run(wait && ready_.empty(), out), first, out);
  }
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    const size_t first = out.size();
    return Finish(ready_.empty() ? inner().RunUntil(deadline_ns, out)
                                 : inner().Run(false, out),
                  first, out);
  }

  uint32_t inflight() const override {
    return inner().inflight() + static_cast<uint32_t>(ready_.size());
  }

 private:
  // A read issued while the cache held some of its bytes.
  struct Read {
    uint64_t offset;
    const iovec* iov;
    int iov_count;
    VolatileCache::Overlay overlay;
  };

  int Complete(uint64_t tag, int64_t result) {
    ready_.push_back(IoCompletion{tag, result, false});
    return 0;
  }

  // Lays the held data over the reads among out[first..] and appends the
  // completions the cache gave; `appended` is what inner's Run returned.
  int Finish(int appended, size_t first, std::vector<IoCompletion>& out) {
    if (!reads_.empty()) {
      for (size_t i = first; i < out.size(); ++i) {
        if (out[i].wake) continue;
        auto it = reads_.find(out[i].tag);
        if (it == reads_.end()) continue;
        if (out[i].result >= 0) {
          VolatileCache::Apply(it->second.overlay, it->second.offset,
                               it->second.iov, it->second.iov_count);
        }
        reads_.erase(it);
      }
    }
    if (appended < 0 && ready_.empty()) return appended;
    if (appended < 0) appended = 0;
    out.insert(out.end(), ready_.begin(), ready_.end());
    appended += static_cast<int>(ready_.size());
    ready_.clear();
    return appended;
  }

  const std::shared_ptr<VolatileCache> cache_;
  std::vector<IoCompletion> ready_;           // completions of the cache's own
  std::unordered_map<uint64_t, Read> reads_;  // by the caller's tag
  VolatileCache::Overlay overlay_;            // reused per read
};

}  // namespace

std::unique_ptr<IoEngine> WrapWithVolatileCache(
    std::unique_ptr<IoEngine> inner, std::shared_ptr<VolatileCache> cache) {
  return std::make_unique<VolatileCacheEngine>(std::move(inner),
                                               std::move(cache));
}

}  // namespace pvdisk::io
