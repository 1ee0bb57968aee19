// KickHandler: the backend's side of a queue's kick, as the frontend sees
// it: the mirror of InterruptHandler.
//
// A frontend that publishes requests and finds that the backend asked to be
// told (PushResult::kNotify, counted in kicks_sent) kicks it. By default it
// signals the queue's kick eventfd, which wakes the backend thread. In the
// inline placement the backend is driven by the thread that submits (the
// FUSE queue's), and a KickHandler makes the kick a function call on that
// thread (it only notes that the backend has work), falling back to the
// eventfd when another thread kicks. Either way the backend takes requests
// only through the ring, so the protocol and its counters are the same.
#pragma once

namespace pvdisk::transport {

class KickHandler {
 public:
  virtual ~KickHandler() = default;
  // The frontend published requests the backend asked to be told about.
  // Any thread; never blocks.
  virtual void HandleKick() = 0;
};

}  // namespace pvdisk::transport
