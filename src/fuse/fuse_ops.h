// FilesystemHandler: the FUSE operations of a Filesystem, on pvdisk's own
// protocol layer. Each operation validates its arguments, hands disk I/O to
// the disk's DiskIo and returns; replies to I/O come from the completion
// path (whichever thread completes the BlockIo).
#pragma once

#include "fuse/protocol/handler.h"

namespace pvdisk::fuse {

class Filesystem;

class FilesystemHandler final : public protocol::Handler {
 public:
  // `fs` must outlive the handler.
  explicit FilesystemHandler(Filesystem* fs) : fs_(*fs) {}

  void Lookup(const protocol::Request& request, protocol::Reply reply) override;
  void Getattr(const protocol::Request& request,
               protocol::Reply reply) override;
  void Setattr(const protocol::Request& request,
               protocol::Reply reply) override;
  void Open(const protocol::Request& request, protocol::Reply reply) override;
  void Read(const protocol::Request& request, protocol::Reply reply) override;
  void Write(const protocol::Request& request, protocol::Reply reply) override;
  void Fsync(const protocol::Request& request, protocol::Reply reply) override;
  void Flush(const protocol::Request& request, protocol::Reply reply) override;
  void Release(const protocol::Request& request,
               protocol::Reply reply) override;
  void Readdir(const protocol::Request& request,
               protocol::Reply reply) override;
  void Statfs(const protocol::Request& request, protocol::Reply reply) override;
  void Fallocate(const protocol::Request& request,
                 protocol::Reply reply) override;

 private:
  Filesystem& fs_;
};

}  // namespace pvdisk::fuse
