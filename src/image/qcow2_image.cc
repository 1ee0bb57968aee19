#include "image/qcow2_image.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "image/qcow2/features.h"
#include "image/qcow2_engine.h"
#include "io/image_lock.h"
#include "io/volatile_cache_engine.h"

namespace pvdisk::image {

absl::StatusOr<std::shared_ptr<Qcow2Image>> Qcow2Image::Open(
    const ImageSpec& spec, const std::vector<int>* fds) {
  std::shared_ptr<Qcow2Image> image(new Qcow2Image());
  image->name_ = spec.path;
  image->read_only_ = spec.read_only;
  image->engine_ = spec.engine;
  const bool direct = EngineWantsDirect(spec.engine);
  using Content = io::ImageFile::Content;
  // The top file first, locked before the chain is opened (which, for a
  // writable image, clears the header's autoclear bits): a refused mount
  // changes nothing.
  if (fds == nullptr) {
    PVDISK_ASSIGN_OR_RETURN(image->files_.emplace_back(),
                            io::ImageFile::Open(spec.path, spec.read_only,
                                                direct, Content::kLayer));
  } else {
    if (fds->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("image ", spec.path, ": no files given"));
    }
    PVDISK_ASSIGN_OR_RETURN(
        image->files_.emplace_back(),
        io::ImageFile::Reopen(fds->front(), spec.path, spec.read_only, direct,
                              Content::kLayer));
  }
  if (spec.lock) {
    const int fd = image->files_.front()->fd();
    PVDISK_RETURN_IF_ERROR(
        fds == nullptr ? io::LockImage(fd, spec.path, spec.read_only)
                       : io::JoinImageLock(fd, spec.path, spec.read_only));
    image->locked_ = true;
  }
  qcow2::ChainOptions options;
  options.writable_top = !spec.read_only;
  options.snapshot = spec.snapshot;
  options.l2_cache_bytes =
      spec.l2_cache_bytes != 0 ? spec.l2_cache_bytes : qcow2::kL2CacheWholeDisk;
  // The chain's own opens of the files, for its metadata I/O: through the
  // engines' top file, so that both are the same inode.
  std::vector<int> chain_fds = {image->files_.front()->fd()};
  if (fds != nullptr)
    chain_fds.insert(chain_fds.end(), fds->begin() + 1, fds->end());
  PVDISK_ASSIGN_OR_RETURN(
      std::unique_ptr<qcow2::ImageChain> chain,
      qcow2::ImageChain::OpenFiles(chain_fds, spec.path, options,
                                   /*rest_by_name=*/fds == nullptr));
  if (chain->layers().front().format != qcow2::Format::kQcow2) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", spec.path, " is not a qcow2 image"));
  }
  for (size_t i = 1; i < chain->layers().size(); ++i) {
    const qcow2::ChainLayer& layer = chain->layers()[i];
    PVDISK_ASSIGN_OR_RETURN(
        image->files_.emplace_back(),
        io::ImageFile::Reopen(layer.fd, layer.path, /*read_only=*/true, direct,
                              Content::kLayer));
  }
  image->state_ =
      std::make_unique<Qcow2State>(std::move(chain), spec.read_only);
  // A backend process may die and be replaced while the disk goes on: what
  // it answered must not depend on its memory.
  image->state_->set_commit_before_answer(fds != nullptr);
  return image;
}

std::string Qcow2Image::identity() const {
  return absl::StrCat(files_.front()->stat_at_open().st_ino);
}

std::vector<int> Qcow2Image::files() const {
  std::vector<int> fds;
  for (const auto& file : files_) fds.push_back(file->fd());
  return fds;
}

std::vector<std::pair<std::string, std::string>> Qcow2Image::Describe() const {
  std::vector<std::pair<std::string, std::string>> lines;
  lines.emplace_back("format", "qcow2");
  // The layers below the top (which `image` names), each PATH:FORMAT.
  std::vector<std::string> chain;
  const std::vector<qcow2::ChainLayer>& layers = state_->chain().layers();
  for (size_t i = 1; i < layers.size(); ++i) {
    chain.push_back(
        absl::StrCat(layers[i].path, ":", qcow2::FormatName(layers[i].format)));
  }
  lines.emplace_back("backing_chain",
                     chain.empty() ? "none" : absl::StrJoin(chain, ","));
  const qcow2::Qcow2Header& h =
      state_->chain().layers().front().qcow2->header();
  lines.emplace_back("cluster_size", absl::StrCat(h.cluster_size()));
  lines.emplace_back("l2_cache", absl::StrCat(state_->chain()
                                                  .layers()
                                                  .front()
                                                  .qcow2->metadata()
                                                  .l2_cache.capacity() *
                                              h.cluster_size()));
  return lines;
}

absl::StatusOr<std::unique_ptr<io::IoEngine>> Qcow2Image::MakeEngine(
    const io::EngineOptions& options) {
  PVDISK_RETURN_IF_ERROR(
      io::CheckEngineOptions(options, size_sectors(), name()));
  io::EngineOptions file_options = options;
  file_options.kind = engine_;
  io::EngineFiles files;
  for (const auto& file : files_) files.push_back(file.get());
  PVDISK_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> engine,
                          io::CreateFileEngine(file_options, files));
  if (options.volatile_cache) {
    if (options.volatile_cache != state_->volatile_cache()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "image ", name_,
          ": a qcow2 image's volatile cache is made by the image, over its "
          "metadata too"));
    }
    // Under the format, where the disk's own cache is: it holds host
    // writes of the top file, not the virtual disk's.
    engine =
        io::WrapWithVolatileCache(std::move(engine), options.volatile_cache);
    file_options.volatile_cache = nullptr;
  }
  engine = MakeQcow2Engine(std::move(engine), *state_, options.depth,
                           options.depth + options.extra_ios);
  return io::WrapEngine(std::move(engine), file_options);
}

absl::StatusOr<std::shared_ptr<io::VolatileCache>>
Qcow2Image::MakeVolatileCache(uint64_t limit_bytes, bool lying_flush) {
  if (read_only_) {
    return absl::InvalidArgumentError(
        absl::StrCat("image ", name_,
                     " is served read-only: a volatile write cache needs a "
                     "writable image"));
  }
  if (state_->volatile_cache()) {
    return absl::FailedPreconditionError(
        absl::StrCat("image ", name_, " has a volatile cache already"));
  }
  auto cache = std::make_shared<io::VolatileCache>(
      state_->chain().layers().front().fd, name_, limit_bytes, lying_flush);
  state_->UseVolatileCache(cache);
  return cache;
}

absl::Status Qcow2Image::Flush() { return state_->Flush(); }

void Qcow2Image::Release() {
  if (!locked_) return;
  io::UnlockImage(files_.front()->fd());
  locked_ = false;
}

}  // namespace pvdisk::image
