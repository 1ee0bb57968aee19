// Qcow2Image: a qcow2 image and its backing chain (qcow2/chain.h) as one
// disk. Its virtual size is the top layer's; its files are the chain's,
// top first (the top read-write unless the disk is read-only, the backing
// layers read-only), each opened for the engines as a format layer
// (io::ImageFile::Content::kLayer: O_DIRECT as the engine wants it, and
// the top may grow). Its engines are qcow2 engines (qcow2_engine.h) over
// engines of those files, all sharing the image's Qcow2State; the image
// itself does no I/O on the request path, and a backend process's open of
// it (from the files) has a state of its own, the only one that serves.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "image/image.h"
#include "image/image_spec.h"
#include "image/qcow2_state.h"
#include "io/image_file.h"

namespace pvdisk::image {

class Qcow2Image final : public Image {
 public:
  // Opens the qcow2 image `spec` names, with its backing chain; with `fds`
  // (not null), from another process's opens of its files() instead.
  // With spec.lock, takes the lock on the top file (or, from `fds`, joins
  // the opener's). Errors are one line naming the file.
  static absl::StatusOr<std::shared_ptr<Qcow2Image>> Open(
      const ImageSpec& spec, const std::vector<int>* fds);
  ~Qcow2Image() override { Release(); }

  const std::string& name() const override { return name_; }
  uint64_t size_bytes() const override { return state_->size(); }
  bool read_only() const override { return read_only_; }
  bool locked() const override { return locked_; }
  std::string identity() const override;
  const struct stat& attributes() const override {
    return files_.front()->stat_at_open();
  }
  io::EngineKind engine() const override { return engine_; }
  std::vector<int> files() const override;
  // A split request's pieces beyond the first; more wait in the engine's
  // backlog.
  uint32_t extra_ios_per_request() const override { return 1; }
  std::vector<std::pair<std::string, std::string>> Describe() const override;

  // cache=volatile (io/volatile_cache.h): the disk's volatile write cache,
  // over the top file as the chain opened it (without O_DIRECT: the
  // metadata's writes are not sector-aligned). The engines' I/O on that
  // file goes through it (MakeEngine puts its decorator right over the
  // file engine, under the qcow2 engine), and so does the metadata's
  // (Qcow2State::UseVolatileCache). Once, before any engine is made; a
  // writable image only. `lying_flush`: see io/test_fault.h.
  absl::StatusOr<std::shared_ptr<io::VolatileCache>> MakeVolatileCache(
      uint64_t limit_bytes, bool lying_flush);

  // options.volatile_cache, when set, must be MakeVolatileCache's.
  absl::StatusOr<std::unique_ptr<io::IoEngine>> MakeEngine(
      const io::EngineOptions& options) override;
  absl::Status Flush() override;
  void Release() override;

 private:
  Qcow2Image() = default;

  std::string name_;
  bool read_only_ = false;
  bool locked_ = false;
  io::EngineKind engine_ = io::EngineKind::kUring;
  std::vector<std::unique_ptr<io::ImageFile>> files_;  // top first
  std::unique_ptr<Qcow2State> state_;
};

}  // namespace pvdisk::image
