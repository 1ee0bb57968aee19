// Image: what one disk reads and writes, as the disk sees it. A raw image
// file and an RBD image today; a format (qcow2, with its backing chain) is a
// third kind behind the same interface. Control path only: the request path
// runs through the engines an image makes, never through the image.
//
// What an image is:
// - a virtual size, the disk's size (a format maps it onto its files, so it
//   need not be any file's size);
// - the files it is made of (none, one for a raw image, one per layer for a
//   backing chain), which is how a backend process gets the same image: the
//   daemon sends files() over SCM_RIGHTS and the backend rebuilds the image
//   with OpenImageFromFiles (open_image.h);
// - state shared by every per-thread engine that outlives each of them (the
//   open files and their locks; librbd's connection and handle; a format's
//   metadata cache, later): the image outlives every engine it made;
// - its own flush, which makes durable whatever it keeps (a format's dirty
//   metadata too), so unmount flushes through the image.
//
// How a format turns one request into several engine I/Os: MakeEngine
// returns the engine that serves the disk; a format returns a decorator over
// an engine of its files (io/engine_decorator.h, as the fault and delay
// decorators wrap one) that maps each virtual request through the image's
// shared metadata into I/Os on the files (metadata reads first, then the
// data), completing the request with the last of them. The engine model
// gives it what that needs (io/io_engine.h): room beyond the ring's slots,
// which the image asks for with extra_ios_per_request() and the disk grants
// as EngineOptions::extra_ios; and Run() counting a step that consumed an
// inner completion and issued the next I/O as progress, which the loops that
// drive engines take for work, not idle.
//
// How several files reach one engine: engines are made over all of an
// image's files, top first (io::EngineFiles, in the order of files()), and
// IoRequest::file (in the padding after IoRequest::op: a request stays the
// same size) says which one a request is for. The uring engine registers
// them all as fixed files, so that the index is the fixed-file slot and a
// request pays nothing for it; the sync engine uses the descriptor of that
// index.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/engine_factory.h"
#include "io/io_engine.h"

namespace pvdisk::image {

class Image {
 public:
  virtual ~Image() = default;

  // How messages and the stats header name the image: its path, or
  // rbd:POOL/IMAGE.
  virtual const std::string& name() const = 0;
  // The disk's size in bytes (a positive multiple of 512).
  virtual uint64_t size_bytes() const = 0;
  uint64_t size_sectors() const { return size_bytes() / 512; }
  virtual bool read_only() const = 0;
  // Whether the image holds its lock (io/image_lock.h) against other users.
  virtual bool locked() const = 0;
  // What names this image and no other while it exists, across opens (a
  // file's inode, librbd's image id): part of the disk's serial.
  virtual std::string identity() const = 0;
  // Owner, group, mode and times for the disk's file in the mount, as they
  // were when the image was opened.
  virtual const struct stat& attributes() const = 0;
  // The engine that serves the image: the one it was opened for (an image of
  // files), or its own (rbd).
  virtual io::EngineKind engine() const = 0;
  // The descriptors of the files the image is made of, in the order it
  // stacks them (top first); empty for an image without local files (RBD).
  // Owned by the image and open while it lives.
  virtual std::vector<int> files() const = 0;
  // Whether a backend process may serve the image besides its opener (and a
  // new one after a crash): OK when a dead backend's writes are fenced off
  // before its successor's. An image of files has the I/O fence on its
  // first file (transport/process/io_fence.h); an RBD image needs librbd's
  // exclusive lock. Otherwise the reason why not, naming the image.
  virtual absl::Status CheckServedElsewhere() const { return absl::OkStatus(); }
  // How the image's own fence knows this open as a writer (an RBD client's
  // address); empty where the I/O fence on the files does the fencing.
  virtual std::string writer() const { return {}; }
  // Fences off `writer` (writer() of another process's open of this image,
  // now dead): once this returns OK, none of its writes lands any more.
  virtual absl::Status FenceDeadWriter(const std::string& writer) {
    (void)writer;
    return absl::OkStatus();
  }
  // How many engine I/Os beyond the request itself the image's engine may
  // have in flight for one ring request (a format's metadata reads or a
  // split of the data): the disk makes engines with that many extra I/Os
  // per ring slot (ExtraIosFor). A raw image: 0.
  virtual uint32_t extra_ios_per_request() const { return 0; }
  // Whether the disk must refuse writes that would put a known image header
  // into its first sector (image_headers.h): a raw image whose format was
  // probed, not given, served writable. The disk's queues refuse them with
  // EPERM and count them (`refused_header_writes`).
  virtual bool refuses_header_writes() const { return false; }
  // Lines of its own for the stats header, after the ones every disk has.
  virtual std::vector<std::pair<std::string, std::string>> Describe() const {
    return {};
  }

  // Makes an engine of engine() (options.kind is ignored) for one backend
  // thread; the image must outlive it. Checks `options` against the
  // virtual size (io::CheckEngineOptions) and wraps the engine in the
  // decorators they ask for (io::WrapEngine). Called once per backend
  // thread, and again when a backend replaces a failed engine.
  virtual absl::StatusOr<std::unique_ptr<io::IoEngine>> MakeEngine(
      const io::EngineOptions& options) = 0;

  // Makes every write its engines have completed durable (fdatasync of the
  // files, rbd_flush, ...). A read-only image has nothing to flush.
  virtual absl::Status Flush() = 0;
  // Frees the image for its next user (drops its locks), once its last I/O
  // is done and flushed. Idempotent; the destructor does it too. Closing is
  // not enough where an io_uring still holds a file (see UnlockImage).
  virtual void Release() = 0;
};

// The extra I/Os (io::EngineOptions::extra_ios) an engine of `image` needs
// for `depth` ring slots: depth times its extra_ios_per_request(), at most
// UINT32_MAX (io::CheckEngineOptions refuses what the engine cannot hold).
inline uint32_t ExtraIosFor(const Image& image, uint32_t depth) {
  const uint64_t extra = uint64_t{depth} * image.extra_ios_per_request();
  return extra > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(extra);
}

}  // namespace pvdisk::image
