// BackendLoop: the device side of one queue, on its own thread. It takes
// requests off the ring (validated by the DeviceRing), hands valid ones to
// the I/O engine, answers invalid ones at once, writes responses as I/O
// completes, interrupts the frontend when the protocol says so, and runs the
// final check before sleeping in the engine until a kick or a completion.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "io/io_engine.h"
#include "stats/queue_stats.h"
#include "transport/device_ring.h"
#include "transport/event_fd.h"

namespace pvdisk::transport {

class BackendLoop {
 public:
  // `max_inflight` bounds the requests taken off the ring and not yet
  // answered (the ring's size). The engine must accept that many at once.
  // All pointers must outlive the loop.
  BackendLoop(std::unique_ptr<DeviceRing> ring,
              std::unique_ptr<io::IoEngine> engine, uint32_t max_inflight,
              EventFd* kick, EventFd* irq, stats::QueueStats* stats);
  ~BackendLoop();
  BackendLoop(const BackendLoop&) = delete;
  BackendLoop& operator=(const BackendLoop&) = delete;

  // Starts the thread.
  void Start();
  // Stops the thread once it has answered every request it took.
  void Stop();

 private:
  void Run();
  // Takes requests while there is a free slot; returns false if the ring
  // is broken.
  bool TakeRequests();
  void Answer(uint32_t slot, int result);
  void Publish();

  std::unique_ptr<DeviceRing> ring_;
  std::unique_ptr<io::IoEngine> engine_;
  EventFd* const kick_;
  EventFd* const irq_;
  stats::QueueStats* const stats_;

  // Requests taken and not yet answered, indexed by slot (the engine tag).
  std::vector<DeviceRequest> slots_;
  std::vector<uint32_t> free_slots_;
  bool broken_ = false;

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pvdisk::transport
