// fuse_floor: the cost of FUSE alone, as a benchmark target.
//
// A trivial server on pvdisk's own FUSE layer (src/fuse/protocol and
// src/fuse/channel, the same Session, channels and INIT settings as pvdisk)
// with one file, `disk`, of a given size: reads are answered with zeros and
// writes acknowledged, inline on the channel thread that received them. No
// rings, no backend, no disk. fio on it measures the ceiling that the
// kernel's FUSE path and the channel leave to any FUSE disk on this
// machine; bench/compare runs it beside pvdisk --engine null, as `floor`
// (classic channel) and `floor-uring`.
//
// With IMAGE (uring only: an image file, or rbd:POOL/IMAGE[,conf=PATH]) it
// serves that image instead of zeros, each queue thread handing requests to
// a pvdisk I/O engine on its own FUSE ring (floor_disk.h): pvdisk without
// its transport, bench/compare's `floor-disk`. IMAGE may carry
// delay=US[,delay-write=US], and words after it choose the engine
// (engine=uring|null), cap it (max-inflight=N) and make the queue threads
// spin while it holds requests (spin=held): with engine=null and a delay,
// the delay model's floor (bench/delay's `floor` configs).
//
// usage: fuse_floor MOUNTPOINT SIZE_BYTES [classic|uring [QUEUE_DEPTH
//          [IMAGE [engine=uring|null] [max-inflight=N] [spin=held]]]]
//        (foreground; ends on unmount, SIGTERM or SIGINT)
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floor_disk.h"
#include "fuse/channel/server.h"
#include "fuse/channel/uring_support.h"
#include "fuse/fuse_channel_options.h"
#include "fuse/protocol/abi.h"
#include "fuse/protocol/handler.h"

namespace {

using pvdisk::fuse::protocol::Reply;
using pvdisk::fuse::protocol::Request;
namespace abi = pvdisk::fuse::abi;
namespace protocol = pvdisk::fuse::protocol;
namespace channel = pvdisk::fuse::channel;

constexpr uint64_t kDiskInode = 2;
constexpr const char* kDiskName = "disk";
constexpr double kTimeout = 60.0;
// What every read returns: zeros, as much as the largest FUSE request.
char g_zeros[protocol::kMaxWrite];

class FloorHandler final : public protocol::Handler {
 public:
  // `disk` (may be null: zeros): the image that reads and writes go to.
  FloorHandler(uint64_t size, pvdisk::bench::FloorDisk* disk)
      : size_(size), disk_(disk) {}

  void Lookup(const Request& request, Reply reply) override {
    if (request.nodeid != abi::kRootId || request.name != kDiskName) {
      return reply.Error(ENOENT);
    }
    reply.Struct(protocol::EntryOut(kDiskInode, Stat(kDiskInode), kTimeout));
  }
  void Getattr(const Request& request, Reply reply) override {
    if (request.nodeid != abi::kRootId && request.nodeid != kDiskInode) {
      return reply.Error(ENOENT);
    }
    reply.Struct(protocol::AttrOut(Stat(request.nodeid), kTimeout));
  }
  void Open(const Request& request, Reply reply) override {
    if (request.nodeid != kDiskInode) return reply.Error(EISDIR);
    reply.Struct(protocol::OpenOut(
        0, abi::kFopenDirectIo | abi::kFopenParallelDirectWrites));
  }
  void Read(const Request& request, Reply reply) override {
    if (disk_ != nullptr) return disk_->Read(request, std::move(reply));
    uint64_t count =
        request.offset >= size_
            ? 0
            : std::min<uint64_t>(request.size, size_ - request.offset);
    reply.Bytes(g_zeros, static_cast<size_t>(count));
  }
  void Write(const Request& request, Reply reply) override {
    if (disk_ != nullptr) return disk_->Write(request, std::move(reply));
    reply.Struct(
        protocol::WriteOut(static_cast<uint32_t>(request.data.size())));
  }
  void Fsync(const Request&, Reply reply) override {
    if (disk_ != nullptr) return disk_->Fsync(std::move(reply));
    reply.Ok();
  }

 private:
  struct stat Stat(uint64_t ino) const {
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    st.st_ino = ino;
    st.st_uid = getuid();
    st.st_gid = getgid();
    if (ino == abi::kRootId) {
      st.st_mode = S_IFDIR | 0755;
      st.st_nlink = 2;
    } else {
      st.st_mode = S_IFREG | 0644;
      st.st_nlink = 1;
      st.st_size = static_cast<off_t>(size_);
    }
    return st;
  }

  const uint64_t size_;
  pvdisk::bench::FloorDisk* const disk_;
};

int Usage() {
  std::fprintf(stderr,
               "usage: fuse_floor MOUNTPOINT SIZE_BYTES [classic|uring "
               "[QUEUE_DEPTH [IMAGE [engine=uring|null] [max-inflight=N] "
               "[spin=held]]]] (SIZE_BYTES > 0; IMAGE: uring only, an image "
               "file[,delay=US] or rbd:POOL/IMAGE[,conf=PATH], at least "
               "SIZE_BYTES long)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  char* end = nullptr;
  uint64_t size = std::strtoull(argv[2], &end, 10);
  if (size == 0 || *end != '\0') return Usage();
  channel::ServeOptions options;
  options.mountpoint = argv[1];
  options.mount_options = "fsname=fuse_floor,default_permissions";
  if (geteuid() == 0) options.mount_options += ",allow_other";
  options.channel.fuse_io = channel::FuseIo::kClassic;
  if (argc >= 4) {
    auto io = channel::ParseFuseIo(argv[3]);
    if (!io.ok() || *io == channel::FuseIo::kAuto) return Usage();
    options.channel.fuse_io = *io;
  }
  if (argc >= 5) {
    unsigned long depth = std::strtoul(argv[4], &end, 10);
    if (depth == 0 || depth > channel::kMaxUringQueueDepth || *end != '\0') {
      return Usage();
    }
    options.channel.queue_depth = static_cast<uint32_t>(depth);
  }
  if (options.channel.fuse_io == channel::FuseIo::kUring) {
    std::string note;
    auto resolved = channel::ResolveFuseIo(channel::FuseIo::kUring, &note);
    if (!resolved.ok()) {
      std::fprintf(stderr, "fuse_floor: %s\n",
                   std::string(resolved.status().message()).c_str());
      return 2;
    }
  }
  std::unique_ptr<pvdisk::bench::FloorDisk> disk;
  if (argc >= 6) {
    if (options.channel.fuse_io != channel::FuseIo::kUring) {
      std::fprintf(stderr, "fuse_floor: an IMAGE needs the uring channel\n");
      return 2;
    }
    auto floor_options = pvdisk::bench::ParseFloorOptions(
        std::vector<std::string_view>(argv + 6, argv + argc));
    if (!floor_options.ok()) {
      std::fprintf(stderr, "fuse_floor: %s\n",
                   std::string(floor_options.status().message()).c_str());
      return 2;
    }
    // Spreading lets a queue thread hold entries of every queue.
    const uint32_t held = options.channel.queue_depth * channel::PossibleCpus();
    auto opened =
        pvdisk::bench::FloorDisk::Open(argv[5], size, held, *floor_options);
    if (!opened.ok()) {
      std::fprintf(stderr, "fuse_floor: %s\n",
                   std::string(opened.status().message()).c_str());
      return 2;
    }
    disk = std::move(*opened);
    options.companions.make = [&disk](uint32_t qid) {
      return disk->MakeCompanion(qid);
    };
    options.companions.sq_entries = held;
    // As pvdisk's inline placement runs its queue threads, with the
    // channel defaults a delay model changes (fuse_channel_options.h); the
    // queue depth is the caller's.
    options.channel.spread = true;
    options.channel.auto_pin_deep_at =
        pvdisk::fuse::AutoPinDeepAt(disk->delayed());
  }
  FloorHandler handler(size, disk.get());
  absl::Status served = channel::Serve(options, &handler, {});
  if (!served.ok()) {
    std::fprintf(stderr, "fuse_floor: %s\n",
                 std::string(served.message()).c_str());
    return 1;
  }
  return 0;
}
