// BackendLoop: one backend thread, serving a fixed set of queues with one
// I/O engine (one io_uring), as a blkback kthread serves its rings.
//
// Each round it takes requests off every ring (validated by the DeviceRing),
// maps their pages (GrantMapper) and hands them to the engine; answers
// invalid ones at once; writes responses as I/O completes and publishes them
// with one notify decision per ring; and before sleeping optionally polls
// (--poll-us), then runs each ring's final check and sleeps in the engine
// until a kick or a completion. The engine's depth is the sum of the ring
// sizes, so nothing but --engine-max-inflight caps the requests in flight.
//
// An engine that fails as a whole (Run() returns a negative errno, not an
// I/O error) is replaced: the backend destroys it (which waits until the
// kernel holds none of its requests, so no late write can land in pages
// handed back), answers every request it had taken with EIO, makes a new
// engine with the same maker, offers it the same buffers and goes on
// (`engine_restarts`). While no engine can be made, requests are answered
// with EIO and the maker is tried again every 100 ms.
//
// Stop rule: the thread ends only when stopping was asked, it holds no
// request, and no ring it serves has a request waiting, so a request pushed
// during shutdown (e.g. by an interrupt handler run inline in the publish)
// is still served.
//
// Two ways to drive it (placements). Start() gives it a thread of its own
// that sleeps in the engine (the "backend-thread" placement: frontend and
// backend on two sides, as the notification experiments need). Or, made
// with CreateDriven(), another thread calls RunRound() whenever it has a
// moment (the "inline" placement: the FUSE queue's thread, whose io_uring
// the engine borrows, see io/ring_lender.h). Then the loop never sleeps or
// spins itself (DrivenPollUs() tells its driver when a spin would pay), does
// not watch the kick eventfds (its driver does), and its engine must not
// fail as a whole (a borrowed uring engine never does).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "io/io_engine.h"
#include "stats/queue_stats.h"
#include "trace/queue_trace.h"
#include "transport/device_ring.h"
#include "transport/event_fd.h"
#include "transport/grant_mapper.h"
#include "transport/interrupt_handler.h"
#include "transport/kick_follow.h"

namespace pvdisk::transport {

// One queue as the backend sees it. Pointers must outlive the loop.
struct BackendQueue {
  DeviceRing* ring = nullptr;
  GrantMapper* grants = nullptr;
  EventFd* kick = nullptr;
  EventFd* irq = nullptr;
  // When set (--irq inline), interrupts run this handler on the backend
  // thread instead of signalling `irq`.
  InterruptHandler* inline_interrupts = nullptr;
  // Told OnRingStopped() when the backend gives up on the ring (any
  // interrupt mode). May be null.
  InterruptHandler* frontend = nullptr;
  stats::QueueStats* stats = nullptr;
  // The queue's trace (take, engine, interrupt steps); a backend process
  // has none of the daemon's and records nothing.
  trace::QueueTrace* trace = trace::QueueTrace::Off();
  uint32_t ring_slots = 0;
  // The engine buffer that holds this queue's data pages (when persistent),
  // or -1.
  int buffer_index = -1;
  // Where the queue's events are logged (base/event_log.h): its disk's
  // file name in the mount and its index among the disk's queues.
  std::string disk;
  uint32_t index = 0;
};

// pvdisk mount's --poll-us default: at iodepth 1 a 50 us poll catches the
// next request before the backend sleeps (rr4k_qd1 0.51 -> 0.71 of native,
// measured 2026-11-30); with I/O in flight the backend never polls.
inline constexpr uint32_t kDefaultPollUs = 50;

struct BackendOptions {
  // Most I/Os in flight at the engine at once; 0 = no cap beyond the rings.
  uint32_t engine_max_inflight = 0;
  // Spin this long for new work before sleeping while requests come one at
  // a time (see BackendLoop::ShouldPoll); 0 = never.
  uint32_t poll_us = 0;
};

// Makes the engine of one backend thread (and its replacements).
using EngineMaker =
    std::function<absl::StatusOr<std::unique_ptr<io::IoEngine>>()>;

class BackendLoop {
 public:
  // Makes the first engine with `make_engine` (its error is returned) and
  // offers it `buffers` (the engine buffers BackendQueue::buffer_index
  // refers to). `make_engine` is kept for replacements.
  static absl::StatusOr<std::unique_ptr<BackendLoop>> Create(
      std::vector<BackendQueue> queues, std::vector<iovec> buffers,
      EngineMaker make_engine, const BackendOptions& options);
  // The same, for a loop that its caller's thread drives with RunRound()
  // (never Start()). Call it on that thread.
  static absl::StatusOr<std::unique_ptr<BackendLoop>> CreateDriven(
      std::vector<BackendQueue> queues, std::vector<iovec> buffers,
      EngineMaker make_engine, const BackendOptions& options);
  ~BackendLoop();
  BackendLoop(const BackendLoop&) = delete;
  BackendLoop& operator=(const BackendLoop&) = delete;

  void Start();
  // Stops the thread once it has answered every request it took.
  void Stop();

  // A driven loop's round, on its driver's thread: answers what the engine
  // completed, takes what the rings hold and queues it on the engine,
  // publishes responses (interrupts run inline and may push more), and
  // ends with the rings' final checks, so that the frontend kicks for what
  // it pushes next. Never blocks. Returns true when work is still waiting
  // (call again before sleeping): requests on the rings, or an engine that
  // kept making progress (completions, or progress without one: see
  // io::IoEngine::Run) until the round's last pass; false when only an
  // engine completion or a kick can bring more.
  bool RunRound();
  // A driven loop's driver is going away: destroys the engine on its
  // thread, once every request taken has been answered. An engine that
  // still holds requests (shutdown abandoned them, see
  // Transport::Abandon) is leaked instead: destroying it could wait for
  // them forever, and what it holds may still be written into.
  void ReleaseEngine() {
    if (engine_ != nullptr && engine_->inflight() > 0) {
      (void)engine_.release();
      return;
    }
    engine_.reset();
  }
  // For a driven loop's driver about to sleep: how long it may spin for
  // this loop's I/O completions instead, in us. poll_us while I/O is in
  // flight and requests come one at a time (as ShouldPoll), else 0. The
  // driver spins, not the loop: it owns the ring the completions arrive on.
  uint32_t DrivenPollUs() const;
  // The driver's spin found work before it slept (counted in polls_hit).
  void CountPollHit();

  // The engine's description (the first engine's; replacements come from
  // the same maker). Any thread.
  const std::string& engine_mode() const { return engine_mode_; }
  // Whether the current engine uses the offered buffers. Any thread.
  bool uses_fixed_buffers() const {
    return fixed_buffers_.load(std::memory_order_relaxed);
  }

 private:
  BackendLoop(std::vector<BackendQueue> queues, std::vector<iovec> buffers,
              EngineMaker make_engine, const BackendOptions& options);

  struct FreeDeleter {
    void operator()(uint8_t* memory) const { free(memory); }
  };
  // A request taken off a ring and not yet answered.
  struct Slot {
    DeviceRequest request;
    std::vector<iovec> iov;
    std::vector<PageMapping> mappings;
    // Set while the request goes to the engine through one contiguous copy
    // of its pages, because they need more than io::kMaxIovecs iovecs.
    std::unique_ptr<uint8_t, FreeDeleter> bounce;
    iovec bounce_iov{};
  };
  struct QueueState {
    BackendQueue queue;
    std::vector<Slot> slots;
    std::vector<uint32_t> free_slots;
    bool broken = false;
    bool stop_reported = false;  // frontend->OnRingStopped() was called
    bool has_responses = false;
    uint32_t kicks_seen = 0;  // the kick's LastSignal().count last looked at
  };

  // Makes the first engine and (unless driven) watches the kicks.
  absl::Status Init(bool watch_kicks);
  void Run();
  // Takes requests from queue `q` while it has free slots and the engine
  // cap allows. Returns true if the ring may hold more (stopped by the cap).
  bool TakeRequests(uint32_t q);
  // Maps the request's pages into slot.iov. Returns 0 or -errno.
  int MapSlot(QueueState& state, Slot& slot);
  // For a request whose iovecs exceed what the engine takes: gives it one
  // page-aligned buffer (holding the write data). Returns 0 or -ENOMEM.
  int Bounce(Slot& slot);
  void Answer(uint32_t q, uint32_t slot, int result);
  // Whether `iov` lies in the engine buffer holding the queue's data pool
  // (so that the I/O can name it as a fixed buffer).
  bool InPool(const QueueState& state, const iovec& iov) const;
  void PublishAll();
  // Records a step of `request` into its queue's trace.
  void TraceRequest(const QueueState& state, const DeviceRequest& request,
                    trace::TraceAction action, uint8_t flags = 0);
  // Tells the frontend of each broken ring, once the backend holds none of
  // its requests any more, that the ring is no longer served.
  void ReportStoppedRings();
  bool AtCap() const;
  // Final checks on every ring that could take more; true if work arrived.
  bool FinalChecks();
  // Whether requests come one at a time: the average depth at submission
  // below kPollDepthLimit.
  bool OneAtATime() const;
  // Whether to poll before sleeping (transport/backend_spin.h): only while
  // requests come one at a time, never for what the engine says cannot
  // complete while we spin, and on the kicker's CPU (kick_follow.h) only
  // for a completion on its way.
  bool ShouldPoll() const;
  // The backend thread's turn of KickFollow: after each wake-up, moves the
  // thread to the CPU its kicks come from, or lets it go.
  void FollowKicks(BackendAffinity& affinity);
  // Folds the engine's depth after a submission into depth_ewma_.
  void RecordDepth();
  // Spins up to poll_us for a request or a completion (appended to
  // `completions`); true if either was found.
  bool Poll(std::vector<io::IoCompletion>& completions);
  bool AllIdle() const;
  // Whether a ring still in service has a request waiting.
  bool RequestsWaiting() const;
  // Makes an engine, offers it the buffers and watches the kicks; false
  // (engine_ null) if any of that failed.
  bool MakeEngine();
  // The engine failed as a whole with `error`: tears it down, answers what
  // it held with EIO, and makes a new one.
  void ReplaceEngine(int error);
  // Without an engine: waits up to 100 ms for a kick, then tries to make
  // one.
  void WaitWithoutEngine();
  void AnswerCompletions(const std::vector<io::IoCompletion>& completions);

  std::vector<QueueState> queues_;
  const std::vector<iovec> buffers_;
  const EngineMaker make_engine_;
  // Null only while no engine could be made (requests get EIO meanwhile).
  std::unique_ptr<io::IoEngine> engine_;
  std::string engine_mode_;
  std::atomic<bool> fixed_buffers_{false};
  const BackendOptions options_;

  static constexpr int64_t kEwmaScale = 16;
  static constexpr int64_t kPollDepthLimit = 2;
  // Moving average of the engine's depth right after each submission, in
  // 1/kEwmaScale units.
  int64_t depth_ewma_ = 0;

  // Where the backend thread runs (its own thread only, see FollowKicks).
  KickFollow follow_;

  // Driven by RunRound(): the kicks are the driver's to watch.
  bool driven_ = false;
  std::vector<io::IoCompletion> round_completions_;  // RunRound's scratch

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pvdisk::transport
