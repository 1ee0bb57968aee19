// Handler: what a FUSE filesystem implements on pvdisk's protocol layer.
//
// The Session decodes and validates each request and calls the method for
// its opcode with the decoded Request and the Reply to answer it with.
// INIT, DESTROY, INTERRUPT and the ENOSYS answers are the Session's; a
// Handler only serves files. Each method must answer `reply` exactly once,
// now or later from any thread (see reply.h); it must not wait for I/O, as
// it runs on a channel thread that serves other requests too. Pointers in
// the Request (a name, WRITE data) are valid only until the method returns.
// The defaults answer ENOSYS.
#pragma once

#include <cerrno>
#include <cstdint>

#include "fuse/protocol/reply.h"
#include "fuse/protocol/request.h"

namespace pvdisk::fuse::protocol {

class Handler {
 public:
  virtual ~Handler() = default;

  virtual void Lookup(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Getattr(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Setattr(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Open(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Read(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Write(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Fsync(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Flush(const Request&, Reply reply) { reply.Ok(); }
  virtual void Release(const Request&, Reply reply) { reply.Ok(); }
  virtual void Opendir(const Request&, Reply reply) {
    reply.Struct(OpenOut(0, 0));
  }
  virtual void Readdir(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Releasedir(const Request&, Reply reply) { reply.Ok(); }
  virtual void Statfs(const Request&, Reply reply) { reply.Error(ENOSYS); }
  virtual void Fallocate(const Request&, Reply reply) { reply.Error(ENOSYS); }
  // FORGET and each entry of BATCH_FORGET; nothing to answer.
  virtual void Forget(uint64_t nodeid, uint64_t nlookup) {
    (void)nodeid;
    (void)nlookup;
  }
};

}  // namespace pvdisk::fuse::protocol
