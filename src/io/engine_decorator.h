// EngineDecorator: the base of an engine that wraps another one (a device
// latency model, an injected fault). It forwards every call to the inner
// engine, so a decorator overrides only the calls it changes, and its
// mode() is the inner engine's with the decorator's own note appended.
// Forwarding costs one virtual call per layer, as a hand-written wrapper
// does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/io_engine.h"

namespace pvdisk::io {

class EngineDecorator : public IoEngine {
 public:
  // `note` says what the decorator does, e.g. "EIO on sectors 8+8".
  EngineDecorator(std::unique_ptr<IoEngine> inner, std::string_view note)
      : inner_(std::move(inner)),
        mode_(inner_->mode().empty() ? std::string(note)
                                     : absl::StrCat(std::string(inner_->mode()),
                                                    "; ", std::string(note))) {}

  std::string_view name() const override { return inner_->name(); }
  std::string_view mode() const override { return mode_; }
  int Queue(const IoRequest& request) override {
    return inner_->Queue(request);
  }
  absl::Status WatchWakeFd(int fd, uint64_t tag) override {
    return inner_->WatchWakeFd(fd, tag);
  }
  int Run(bool wait, std::vector<IoCompletion>& out) override {
    return inner_->Run(wait, out);
  }
  int RunUntil(int64_t deadline_ns, std::vector<IoCompletion>& out) override {
    return inner_->RunUntil(deadline_ns, out);
  }
  uint32_t inflight() const override { return inner_->inflight(); }
  bool completes_while_spinning() const override {
    return inner_->completes_while_spinning();
  }
  void OfferBuffers(std::vector<iovec> buffers) override {
    inner_->OfferBuffers(std::move(buffers));
  }
  bool uses_fixed_buffers() const override {
    return inner_->uses_fixed_buffers();
  }
  bool TakeFormatCounts(FormatCounts& out) override {
    return inner_->TakeFormatCounts(out);
  }

 protected:
  IoEngine& inner() { return *inner_; }
  const IoEngine& inner() const { return *inner_; }

 private:
  std::unique_ptr<IoEngine> inner_;
  const std::string mode_;
};

}  // namespace pvdisk::io
