#include "fuse/channel/uring_channel.h"

#include <liburing.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "base/thread.h"
#include "fuse/channel/fixed_buffer_table.h"
#include "fuse/protocol/abi.h"
#include "fuse/protocol/request.h"

namespace pvdisk::fuse::channel {
namespace {

// user_data: a FUSE entry's index (below 2^32), the wake read's kWakeTag,
// or a companion's CQE (a lent tag, from bit RingLender::kSinkBits up).
constexpr uint64_t kWakeTag = uint64_t{1} << 32;
constexpr size_t kHeaderBytes = 512;  // one fuse_uring_req_header, padded
// A reply that carries this much data is committed at once, not at the end
// of the round. Why: a clump of large READ completions committed together
// reaches the reader together, and it sends its next requests together;
// sequential neighbours among them merge in the block layer, and the device
// then holds one large request where it could hold several. Measured with
// fio 128 KiB sequential reads at iodepth 8 on vda: committed at the end of
// the round, the device saw ~490 KiB requests at a depth of 1.1 (2.8 merges
// per request); committed at once, ~170 KiB at a depth of 3.4, and 1.2-1.6x
// the IOPS. 32 KiB reads at iodepth 16 did not move either way
// (docs/perf/compare-2026-12-04-commit-at-once.md).
constexpr size_t kCommitAtOnceBytes = 64 << 10;
// A queue thread holding two or more requests that weigh this many units
// at once sends every other reply out through another queue thread
// (UringChannel::SpreadTarget). A request weighs one unit and one more per
// kSpreadUnitBytes of data it brings (a WRITE's): the kernel copies that
// data into the entry on the thread whose ring takes the request, so one
// thread taking four 1 MiB writes copies 4 MiB in a row while the disk
// waits. So 4 KiB writes spread from 8 held (as when requests were counted
// alone, against 8), large writes from 2, reads (which bring nothing) from
// 16. Measured side by side, two builds mounted on one image, means of 4-6
// rounds of fio: counted alone, 1 MiB writes at iodepth 4 never spread
// (1793 MiB/s against 2314 weighed by a first version, 1 unit per 16 KiB
// against 8, native 2301; these weights 2374 against its 2319); reads
// spreading from 16
// instead of 8 gave 4 KiB reads at iodepth 32 54.0K against 49.9K IOPS
// (and 51.7K against 49.2K with the mounts' order swapped) and 128 KiB
// reads at iodepth 8 10.6K against 9.7K, two 4 KiB jobs at depth 32 the
// same (59.9K, 59.8K). A threshold of two requests of any size made 4 KiB
// reads at depth 32 slower still (45.8K against 48.9K).
constexpr uint32_t kSpreadDepth = 16;
constexpr uint32_t kSpreadUnitBytes = 4 << 10;

uint32_t SpreadUnits(uint32_t payload_bytes) {
  return 1 + payload_bytes / kSpreadUnitBytes;
}

uint64_t Slot(uint32_t qid, uint32_t entry) {
  return (uint64_t{qid} << 32) | entry;
}

// A FUSE entry command's user_data: its FUSE queue and index, below
// kWakeTag (queue depths and queue counts are below 2^16).
constexpr uint64_t EntryTag(uint32_t qid, uint32_t index) {
  return (uint64_t{qid} << 16) | index;
}
constexpr uint32_t EntryQueue(uint64_t tag) {
  return static_cast<uint32_t>(tag >> 16);
}
constexpr uint32_t EntryIndex(uint64_t tag) {
  return static_cast<uint32_t>(tag & 0xffff);
}

}  // namespace

uint32_t PossibleCpus() {
  // "0-1", "0-3,5": the kernel's cpu_possible_mask; queues are numbered by
  // CPU, so the count is the highest CPU + 1.
  std::ifstream file("/sys/devices/system/cpu/possible");
  std::string text;
  if (!std::getline(file, text) || text.empty()) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? static_cast<uint32_t>(n) : 1;
  }
  size_t last = text.find_last_of(",-");
  std::string tail = last == std::string::npos ? text : text.substr(last + 1);
  return static_cast<uint32_t>(std::stoul(tail)) + 1;
}

struct UringChannel::Queue final : public io::RingLender {
  enum class State { kInKernel, kWithHandler, kParked, kDead };
  struct Entry {
    abi::fuse_uring_req_header* header = nullptr;
    uint8_t* payload = nullptr;
    iovec iov[2];
    uint64_t commit_id = 0;
    uint32_t last_cmd = abi::kUringCmdRegister;
    State state = State::kInKernel;
    // The queue thread whose ring holds the entry's command, which takes
    // its requests and commits its replies (set when it registers it).
    Queue* holder = nullptr;
    // What its request weighs (SpreadUnits), set when it is taken.
    uint32_t spread_units = 0;
  };

  uint32_t qid = 0;
  io_uring uring;
  bool ring_ready = false;
  int wake_fd = -1;
  uint64_t wake_value = 0;
  void* header_memory = nullptr;
  size_t header_bytes = 0;
  void* payload_memory = nullptr;
  size_t payload_bytes = 0;
  bool payload_owned = false;  // mapped here (else the arena's)
  std::vector<Entry> entries;
  std::thread thread;
  // Destroyed after the ring is closed (see ~Queue): its armed reads may
  // point into it until then.
  std::unique_ptr<RingCompanion> companion;
  bool companion_attached = false;
  std::vector<io::CqeSink*> sinks;  // lent tag >> kSinkBits, minus one

  // Owner thread only. Commits as EntryTag(fuse queue, index).
  std::vector<uint64_t> local_commits;
  uint32_t with_handler = 0;  // entries handed out, not yet committed
  uint32_t held_units = 0;    // what their requests weigh (SpreadUnits)

  uint32_t spread_turn = 0;       // which of the replies at depth move away
  bool stop_taking_seen = false;  // counted in stop_taking_seen_ (owner only)

  // Answers made on other threads.
  std::mutex mu;
  std::vector<uint64_t> remote_commits;  // guarded by mu
  // Entries another queue thread hands over for this one to commit, and
  // so to hold from then on (guarded by mu); refused once `closed`.
  std::vector<uint64_t> moved_in;
  bool closed = false;
  std::atomic<bool> wake_pending{false};

  ~Queue() override {
    if (ring_ready) io_uring_queue_exit(&uring);
    if (wake_fd >= 0) close(wake_fd);
    if (header_memory) munmap(header_memory, header_bytes);
    if (payload_memory && payload_owned) munmap(payload_memory, payload_bytes);
  }

  // io::RingLender, for the companion's engines (owner thread only).
  io_uring* ring() override { return &uring; }
  uint64_t Lend(io::CqeSink* sink) override {
    for (size_t i = 0; i < sinks.size(); ++i) {
      if (sinks[i] == nullptr) {
        sinks[i] = sink;
        return uint64_t{i + 1} << kSinkBits;
      }
    }
    sinks.push_back(sink);
    return uint64_t{sinks.size()} << kSinkBits;
  }
  void Unlend(uint64_t tag) override {
    uint64_t index = (tag >> kSinkBits) - 1;
    if (index < sinks.size()) sinks[index] = nullptr;
  }
  int AddFixedBuffers(const std::vector<iovec>& buffers) override {
    return fixed_buffers ? fixed_buffers->AddEngineBuffers(buffers) : -1;
  }
  int FixedBufferFor(const void* data, size_t length) override {
    return fixed_buffers ? fixed_buffers->ForPayload(data, length) : -1;
  }
  // Made with the ring (Run); closed with it.
  std::unique_ptr<FixedBufferTable> fixed_buffers;

  // Hands a lent CQE to its sink; false if `tag` is not a lent one.
  bool RouteToSink(uint64_t tag, int32_t res) {
    uint64_t index = tag >> kSinkBits;
    if (index == 0) return false;
    if (index <= sinks.size() && sinks[index - 1] != nullptr) {
      sinks[index - 1]->OnCqe(tag, res);
    }
    return true;  // a sink gone since: nothing left to tell
  }

  void Wake() {
    if (!wake_pending.exchange(true, std::memory_order_acq_rel)) {
      uint64_t one = 1;
      while (write(wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
      }
    }
  }

  io_uring_sqe* GetSqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&uring);
    if (sqe == nullptr) {
      io_uring_submit(&uring);
      sqe = io_uring_get_sqe(&uring);
    }
    return sqe;
  }

  // Queues, on this thread's ring, the next command (REGISTER or
  // COMMIT_AND_FETCH) of entry `index` of FUSE queue `owner`.
  void QueueCommand(Queue& owner, uint32_t index, uint32_t cmd) {
    Entry& entry = owner.entries[index];
    entry.holder = this;
    io_uring_sqe* sqe = GetSqe();
    if (sqe == nullptr) {
      LogInfo("FUSE queue %u: no submission slot; entry lost", owner.qid);
      entry.state = State::kDead;
      return;
    }
    std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));  // a 128-byte SQE
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->flags = IOSQE_FIXED_FILE;
    sqe->fd = 0;  // index into the registered files
    sqe->cmd_op = cmd;
    sqe->user_data = EntryTag(owner.qid, index);
    auto* request = reinterpret_cast<abi::fuse_uring_cmd_req*>(sqe->cmd);
    request->qid = static_cast<uint16_t>(owner.qid);
    if (cmd == abi::kUringCmdRegister) {
      sqe->addr = reinterpret_cast<uint64_t>(entry.iov);
      sqe->len = 2;
    } else {
      request->commit_id = entry.commit_id;
    }
    entry.last_cmd = cmd;
    entry.state = State::kInKernel;
  }

  void ArmWake() {
    io_uring_sqe* sqe = GetSqe();
    if (sqe == nullptr) return;
    std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));
    io_uring_prep_read(sqe, wake_fd, &wake_value, sizeof(wake_value), 0);
    sqe->user_data = kWakeTag;
  }

  // Spins up to `us` microseconds, without waiting in the kernel, until a
  // completion is posted or pending (with COOP_TASKRUN and TASKRUN_FLAG a
  // completion waiting to be posted sets IORING_SQ_TASKRUN; the next
  // io_uring_enter posts it). True if one came; false at the deadline or
  // when `stop` is set. What it saves: the thread's wake-up from sleep
  // (on this VM, a halted vCPU's) for a lone request's completion.
  // Each turn yields the CPU: at the low depth that lets it spin, this
  // thread runs on the CPU its requests come from, and the work that completes
  // the I/O may need that CPU (a loop device's worker, librbd's threads).
  // Measured at rr4k_qd1 on a loop device over tmpfs: a spin without the yield
  // 0.34/0.48/0.50 of native, no spin 0.50/0.45/0.45, the yielding spin
  // 0.53/0.52/0.50 and 0.76/0.55/0.52; on vda the yielding spin 0.59-0.61
  // against 0.54-0.61 (measured 2026-12-02).
  bool SpinForCompletion(uint32_t us, const std::atomic<bool>& stop) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    do {
      if (io_uring_cq_ready(&uring) > 0 ||
          (IO_URING_READ_ONCE(*uring.sq.kflags) & IORING_SQ_TASKRUN) != 0) {
        return true;
      }
      sched_yield();
    } while (std::chrono::steady_clock::now() < deadline &&
             !stop.load(std::memory_order_relaxed));
    return false;
  }

  // Commits what was answered (here and on other threads), in index order.
  // Why: the kernel puts an entry committed back at the head of the queue's
  // list of free entries and takes new requests from there, so the entry
  // committed last is reused first. Committing each batch in index order
  // keeps the top entries, those in huge pages (payload_arena.h), on top:
  // a queue that holds few requests at once keeps to them even after a
  // deeper burst has cycled through the others. Committed in the order
  // answered, a 128 KiB job at depth 8 after a 4 KiB job at depth 32
  // kept the burst's last entries
  // (docs/perf/compare-2026-12-02-index-order-commits-*.md).
  void FlushCommits(const std::vector<std::unique_ptr<Queue>>& all) {
    std::sort(local_commits.begin(), local_commits.end());
    for (uint64_t tag : local_commits) {
      Queue& owner = *all[EntryQueue(tag)];
      Release(owner.entries[EntryIndex(tag)].spread_units);
      QueueCommand(owner, EntryIndex(tag), abi::kUringCmdCommitAndFetch);
    }
    local_commits.clear();
  }
  void TakeRemoteCommits(const std::vector<std::unique_ptr<Queue>>& all) {
    wake_pending.store(false, std::memory_order_release);
    std::vector<uint64_t> taken;
    {
      std::lock_guard<std::mutex> lock(mu);
      taken.swap(remote_commits);
    }
    local_commits.insert(local_commits.end(), taken.begin(), taken.end());
    TakeMovedIn(all, /*close=*/false);
  }
  // Takes the entries handed over to this thread (see Send), and with
  // `close` refuses further ones: a thread that is about to exit.
  void TakeMovedIn(const std::vector<std::unique_ptr<Queue>>& all, bool close) {
    std::vector<uint64_t> taken;
    {
      std::lock_guard<std::mutex> lock(mu);
      taken.swap(moved_in);
      if (close) closed = true;
    }
    for (uint64_t tag : taken) {
      ++with_handler;
      held_units += all[EntryQueue(tag)]->entries[EntryIndex(tag)].spread_units;
    }
    local_commits.insert(local_commits.end(), taken.begin(), taken.end());
  }
  // A request of this weight is no longer held here (committed or handed
  // on). The caller reads the weight while the entry is still its own: once
  // handed on, another thread may take the entry's next request at once.
  void Release(uint32_t spread_units) {
    --with_handler;
    held_units -= spread_units;
  }
};

namespace {
// The queue whose owner thread this is (for Send's same-thread path).
thread_local const void* current_queue = nullptr;
}  // namespace

UringChannel::UringChannel(int fd, protocol::Session* session,
                           uint32_t queue_depth, uint32_t payload_bytes,
                           RingCompanionMaker make_companion,
                           uint32_t companion_sq_entries,
                           const PayloadArena* arena, QueuePin pin, bool spread)
    : fd_(fd),
      session_(session),
      depth_(queue_depth),
      payload_bytes_(payload_bytes),
      make_companion_(std::move(make_companion)),
      companion_sq_entries_(companion_sq_entries),
      arena_(arena),
      pin_(pin),
      spread_(spread) {}

UringChannel::~UringChannel() { Stop(); }

absl::Status UringChannel::Start() {
  uint32_t count = PossibleCpus();
  if (arena_ != nullptr &&
      (arena_->queues() < count || arena_->depth() != depth_ ||
       arena_->payload_bytes() != payload_bytes_)) {
    return absl::InternalError(
        "the FUSE payload arena does not match the uring queues");
  }
  for (uint32_t q = 0; q < count; ++q) {
    auto queue = std::make_unique<Queue>();
    queue->qid = q;
    queues_.push_back(std::move(queue));
  }
  for (auto& queue : queues_) {
    Queue* q = queue.get();
    std::string name = absl::StrCat("pvdisk-fuse-q", q->qid);
    q->thread = StartThreadWithoutSignals(name.c_str(), [this, q] { Run(q); });
  }
  std::unique_lock<std::mutex> lock(start_mu_);
  start_cv_.wait(lock, [&] { return set_up_ == queues_.size(); });
  absl::Status error = setup_error_;
  lock.unlock();
  if (!error.ok()) Stop();
  return error;
}

void UringChannel::Register() {
  std::lock_guard<std::mutex> lock(start_mu_);
  go_ = true;
  start_cv_.notify_all();
}

void UringChannel::RunWithoutFuse() {
  std::lock_guard<std::mutex> lock(start_mu_);
  register_fuse_ = false;
  go_ = true;
  start_cv_.notify_all();
}

void UringChannel::StopTaking() {
  stop_taking_.store(true, std::memory_order_seq_cst);
  std::unique_lock<std::mutex> lock(start_mu_);
  // Not begun: a thread that begins later (go_ is set under this mutex)
  // reads the flag after we set it.
  if (!go_) return;
  lock.unlock();
  // A thread asleep in io_uring_enter ends its round on the wake.
  for (auto& queue : queues_) {
    if (queue->wake_fd >= 0) queue->Wake();
  }
  // Counted before waiting: Stop() clears queues_ (a caller that gives up
  // on this wait may call it from another thread).
  const size_t queues = queues_.size();
  lock.lock();
  start_cv_.wait(lock, [&] { return stop_taking_seen_ == queues; });
}

void UringChannel::NoteStopTakingSeen(Queue* queue, bool ended) {
  if (queue->stop_taking_seen) return;
  if (!ended && !stop_taking_.load(std::memory_order_seq_cst)) return;
  queue->stop_taking_seen = true;
  std::lock_guard<std::mutex> lock(start_mu_);
  ++stop_taking_seen_;
  start_cv_.notify_all();
}

void UringChannel::Stop() {
  stop_taking_.store(true, std::memory_order_release);
  stop_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(start_mu_);
    go_ = true;
    start_cv_.notify_all();
  }
  for (auto& queue : queues_) {
    if (queue->wake_fd >= 0) queue->Wake();
    if (queue->thread.joinable()) queue->thread.join();
  }
  queues_.clear();
}

void UringChannel::Send(uint64_t slot, uint64_t unique, int error,
                        std::span<const iovec> payload) {
  Queue& queue = *queues_[slot >> 32];
  uint32_t index = static_cast<uint32_t>(slot);
  Queue::Entry& entry = queue.entries[index];
  size_t total = 0;
  for (const iovec& piece : payload) total += piece.iov_len;
  if (total > payload_bytes_) {
    LogInfo("a FUSE reply of %u bytes does not fit the ring entry",
            static_cast<unsigned>(total));
    error = EIO;
    total = 0;
  } else {
    uint8_t* to = entry.payload;
    for (const iovec& piece : payload) {
      // A read that landed in the payload itself (PayloadBuffer) is there.
      if (piece.iov_base != to) std::memmove(to, piece.iov_base, piece.iov_len);
      to += piece.iov_len;
    }
  }
  abi::fuse_out_header out{};
  out.len = static_cast<uint32_t>(sizeof(out) + total);
  out.error = -error;
  out.unique = unique;
  std::memcpy(entry.header->in_out, &out, sizeof(out));
  entry.header->ring_ent_in_out.payload_sz = static_cast<uint32_t>(total);
  Queue& holder = *entry.holder;
  if (current_queue == &holder) {
    Queue* to = SpreadTarget(holder, queue);
    if (to != nullptr) {
      const uint32_t units = entry.spread_units;  // before the entry goes
      bool moved = false;
      {
        std::lock_guard<std::mutex> lock(to->mu);
        if (!to->closed) {
          to->moved_in.push_back(EntryTag(queue.qid, index));
          moved = true;
        }
      }
      if (moved) {
        holder.Release(units);
        to->Wake();
        return;
      }
    }
    holder.local_commits.push_back(EntryTag(queue.qid, index));
    if (total >= kCommitAtOnceBytes) {
      holder.FlushCommits(queues_);
      io_uring_submit(&holder.uring);
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(holder.mu);
    holder.remote_commits.push_back(EntryTag(queue.qid, index));
  }
  holder.Wake();
}

UringChannel::Queue* UringChannel::SpreadTarget(Queue& holder,
                                                const Queue& owner) {
  const uint32_t n = static_cast<uint32_t>(queues_.size());
  if (!spread_ || n < 2 || stop_taking_.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  if (&holder == &owner) {
    // At depth every other reply goes out through another queue thread, in
    // turn. Where the balance settles: this thread keeps handing entries
    // away while it holds two or more requests weighing kSpreadDepth units
    // or more (first measured at one fio job of 4 KiB writes at depth 32 on
    // 2 CPUs: both threads equally busy).
    if (holder.with_handler < 2 || holder.held_units < kSpreadDepth) {
      return nullptr;
    }
    const uint32_t turn = holder.spread_turn++;
    if (turn % 2 == 0) return nullptr;
    return queues_[(holder.qid + 1 + (turn / 2) % (n - 1)) % n].get();
  }
  // A lone request on another queue's entry: the entry goes home.
  if (holder.with_handler <= 1) return queues_[owner.qid].get();
  return nullptr;
}

std::span<uint8_t> UringChannel::PayloadBuffer(uint64_t slot) {
  Queue& queue = *queues_[slot >> 32];
  return {queue.entries[static_cast<uint32_t>(slot)].payload, payload_bytes_};
}

// A round can bring a deep submitter's whole batch of FUSE requests at
// once. With a companion (the inline placement), their image I/O goes to
// the kernel every kEarlySubmitEvery requests instead of once at the end of
// the round: a virtual disk handed one burst per round serves it as a
// convoy. Measured here at fio iodepth 32 (4 KiB random reads): 29 requests
// per block-layer plug and a device await of 294 us, against 113 us for
// native fio at the same device depth; submitting every 4 requests made it
// 4 per plug and pvdisk 15-18% faster on the 4 KiB jobs at depth
// (measured 2026-12-01).
constexpr unsigned kEarlySubmitEvery = 4;

void UringChannel::Run(Queue* queue) {
  current_queue = queue;
  // Where this thread runs: on its queue's CPU, where the requests come
  // from, or off it while they come several at once (queue_affinity.h).
  QueueAffinity affinity(pin_, queue->qid);

  bool register_fuse = true;
  absl::Status setup = [&]() -> absl::Status {
    queue->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (queue->wake_fd < 0) return ErrnoError(errno, "eventfd");
    io_uring_params params;
    std::memset(&params, 0, sizeof(params));
    // COOP_TASKRUN: the kernel does not interrupt this thread (an IPI when
    // it runs on another CPU) to post a completion; the completion waits
    // for the thread's next io_uring_enter, which comes every round (a busy
    // round enters too, below). Measured at fio 128 KiB sequential reads,
    // iodepth 8, inline placement, same build side by side: 4.0K -> 6.7K
    // IOPS (measured 2026-12-01); the 4 KiB jobs moved by less than this
    // machine's noise. TASKRUN_FLAG: the kernel flags pending completions in
    // the SQ ring, so every io_uring_submit (the early ones within a round too)
    // also collects them.
    params.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE |
                   IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    // Room for every entry's command, the wake read and the companion's
    // I/O of a round; a fuller round submits early (GetSqe).
    const uint32_t sq_entries =
        std::min<uint32_t>(depth_ + 2 + companion_sq_entries_, 4096);
    params.cq_entries = 2 * sq_entries;
    int ret = io_uring_queue_init_params(sq_entries, &queue->uring, &params);
    if (ret < 0) return ErrnoError(-ret, "io_uring_setup for FUSE");
    queue->ring_ready = true;
    queue->fixed_buffers =
        std::make_unique<FixedBufferTable>(&queue->uring, arena_);
    int files[1] = {fd_};
    ret = io_uring_register_files(&queue->uring, files, 1);
    if (ret < 0) return ErrnoError(-ret, "io_uring_register_files (/dev/fuse)");
    queue->header_bytes = size_t{depth_} * kHeaderBytes;
    queue->payload_bytes = size_t{depth_} * payload_bytes_;
    queue->header_memory =
        mmap(nullptr, queue->header_bytes, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena_ != nullptr) {
      queue->payload_memory = arena_->QueueBase(queue->qid);
    } else {
      queue->payload_memory =
          mmap(nullptr, queue->payload_bytes, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      queue->payload_owned = queue->payload_memory != MAP_FAILED;
    }
    if (queue->header_memory == MAP_FAILED ||
        queue->payload_memory == MAP_FAILED) {
      if (queue->header_memory == MAP_FAILED) queue->header_memory = nullptr;
      if (queue->payload_memory == MAP_FAILED) queue->payload_memory = nullptr;
      return ErrnoError(ENOMEM, "FUSE ring buffers");
    }
    queue->entries.resize(depth_);
    for (uint32_t i = 0; i < depth_; ++i) {
      Queue::Entry& entry = queue->entries[i];
      entry.header = reinterpret_cast<abi::fuse_uring_req_header*>(
          static_cast<uint8_t*>(queue->header_memory) + i * kHeaderBytes);
      entry.payload = static_cast<uint8_t*>(queue->payload_memory) +
                      size_t{i} * payload_bytes_;
      entry.iov[0] = iovec{entry.header, sizeof(abi::fuse_uring_req_header)};
      entry.iov[1] = iovec{entry.payload, payload_bytes_};
    }
    if (make_companion_) {
      queue->companion = make_companion_(queue->qid);
      if (queue->companion) {
        PVDISK_RETURN_IF_ERROR(queue->companion->Attach(queue));
        queue->companion_attached = true;
      }
    }
    return absl::OkStatus();
  }();
  {
    std::unique_lock<std::mutex> lock(start_mu_);
    if (!setup.ok() && setup_error_.ok()) setup_error_ = setup;
    ++set_up_;
    start_cv_.notify_all();
    start_cv_.wait(lock, [&] { return go_; });
    register_fuse = register_fuse_;
  }
  RingCompanion* companion =
      queue->companion_attached ? queue->companion.get() : nullptr;
  if (!setup.ok() || stop_.load(std::memory_order_acquire)) {
    if (companion) companion->Detach();
    NoteStopTakingSeen(queue, /*ended=*/true);
    return;
  }

  if (register_fuse) {
    // In index order: the kernel hands out the entry registered last
    // first, and afterwards the one committed last, so a queue that holds
    // n requests at once uses its top n entries, which the payload arena
    // puts in huge pages (payload_arena.h).
    for (uint32_t i = 0; i < depth_; ++i) {
      queue->QueueCommand(*queue, i, abi::kUringCmdRegister);
    }
  }
  queue->ArmWake();
  bool stopping = false;
  for (;;) {
    // The companion answers what its I/O finished (replies made here are
    // local commits) and queues new I/O on this ring.
    const bool busy = companion != nullptr && companion->Run();
    queue->FlushCommits(queues_);
    if (stopping && queue->with_handler == 0) {
      queue->TakeMovedIn(queues_, /*close=*/true);
      queue->FlushCommits(queues_);
      io_uring_submit(&queue->uring);  // the last commits
      break;
    }
    // A busy round enters the kernel even with nothing to submit: with
    // COOP_TASKRUN that is where completions are posted. An idle one may
    // first hand over its commits and I/O and spin for their completion
    // (the companion says how long).
    const uint32_t poll_us =
        busy || companion == nullptr ? 0 : companion->PollUs();
    bool spun_into_work = false;
    if (poll_us > 0) {
      io_uring_submit(&queue->uring);
      spun_into_work = queue->SpinForCompletion(poll_us, stop_);
      if (spun_into_work) companion->PollHit();
    }
    int ret = busy || spun_into_work
                  ? io_uring_submit_and_get_events(&queue->uring)
                  : io_uring_submit_and_wait(&queue->uring, 1);
    if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
      LogInfo("FUSE queue %u: io_uring_enter failed: %s", queue->qid,
              strerror(-ret));
      break;
    }
    unsigned head;
    unsigned seen = 0;
    unsigned taken = 0;    // FUSE requests this round
    unsigned at_once = 0;  // the most held at once after a take
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&queue->uring, head, cqe) {
      ++seen;
      uint64_t tag = cqe->user_data;
      int res = cqe->res;
      if (queue->RouteToSink(tag, res)) continue;
      if (tag == kWakeTag) {
        queue->TakeRemoteCommits(queues_);
        if (stop_.load(std::memory_order_acquire)) stopping = true;
        queue->ArmWake();
        continue;
      }
      if (EntryQueue(tag) >= queues_.size()) continue;
      Queue& owner = *queues_[EntryQueue(tag)];
      uint32_t index = EntryIndex(tag);
      if (index >= owner.entries.size()) continue;
      Queue::Entry& entry = owner.entries[index];
      if (res == -EAGAIN || res == -EINTR) {
        queue->QueueCommand(owner, index, entry.last_cmd);
        continue;
      }
      if (res != 0) {
        // -ENOTCONN / -ECANCELED: the connection or the ring is going away.
        if (res != -ENOTCONN && res != -ECANCELED) {
          LogInfo("FUSE queue %u: ring entry failed: %s", queue->qid,
                  strerror(-res));
        }
        entry.state = Queue::State::kDead;
        continue;
      }
      entry.commit_id = entry.header->ring_ent_in_out.commit_id;
      if (stop_taking_.load(std::memory_order_acquire)) {
        entry.state = Queue::State::kParked;  // ended by the kernel at unmount
        continue;
      }
      entry.state = Queue::State::kWithHandler;
      protocol::RawRequest raw;
      raw.header =
          reinterpret_cast<const abi::fuse_in_header*>(entry.header->in_out);
      raw.op_in = std::span<const uint8_t>(
          reinterpret_cast<const uint8_t*>(entry.header->op_in),
          abi::kUringOpInOutSize);
      raw.payload = std::span<const uint8_t>(
          entry.payload,
          std::min<uint32_t>(entry.header->ring_ent_in_out.payload_sz,
                             payload_bytes_));
      entry.spread_units =
          SpreadUnits(static_cast<uint32_t>(raw.payload.size()));
      ++queue->with_handler;
      queue->held_units += entry.spread_units;
      ++taken;
      at_once = std::max(at_once, queue->with_handler);
      // Read before the entry is handed on: once Process has passed it to a
      // handler, the reply (from this thread, a backend or interrupt thread,
      // or another queue thread's commit) and then the kernel's next request
      // overwrite the header, so nothing of it is read afterwards.
      const uint32_t opcode = raw.header->opcode;
      const uint64_t unique = raw.header->unique;
      session_->Process(raw, this, Slot(owner.qid, index));
      if (protocol::ExpectsNoReply(opcode)) {
        // Never sent over the ring (they stay on /dev/fuse), and the
        // Session answers them with nothing; the entry must still go back.
        protocol::Reply(this, Slot(owner.qid, index), unique).Error(ENOSYS);
      }
      // Last in the entry's turn: the commits flushed here hand entries,
      // this one included, back to the kernel, which may write a new
      // request into them at once. (A failed submit leaves the SQEs for the
      // round's own submit.)
      if (companion != nullptr && taken % kEarlySubmitEvery == 0) {
        companion->Run();  // takes the requests, queues their image I/O
        queue->FlushCommits(queues_);
        io_uring_submit(&queue->uring);
      }
    }
    io_uring_cq_advance(&queue->uring, seen);
    affinity.Round(at_once);
    // Every request this round took has reached the Session; from the next
    // round on, a thread that saw the flag parks what comes.
    NoteStopTakingSeen(queue, /*ended=*/false);
    if (stop_.load(std::memory_order_acquire)) stopping = true;
  }
  NoteStopTakingSeen(queue, /*ended=*/true);
  if (companion) companion->Detach();
  current_queue = nullptr;
}

}  // namespace pvdisk::fuse::channel
