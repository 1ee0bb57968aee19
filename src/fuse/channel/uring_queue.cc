#include "fuse/channel/uring_queue.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/errno_status.h"
#include "base/log.h"

namespace pvdisk::fuse::channel {

UringQueue::~UringQueue() {
  if (ring_ready_) io_uring_queue_exit(&uring_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (header_memory_) munmap(header_memory_, header_bytes_);
  if (payload_memory_ && payload_owned_) {
    munmap(payload_memory_, payload_memory_bytes_);
  }
}

absl::Status UringQueue::SetUp(int fuse_fd, uint32_t depth,
                               uint32_t payload_bytes,
                               const PayloadArena* arena,
                               uint32_t extra_sq_entries) {
  payload_bytes_ = payload_bytes;
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) return ErrnoError(errno, "eventfd");
  io_uring_params params;
  std::memset(&params, 0, sizeof(params));
  // COOP_TASKRUN: the kernel does not interrupt this thread (an IPI when
  // it runs on another CPU) to post a completion; the completion waits
  // for the thread's next io_uring_enter, which comes every round (a busy
  // round enters too: uring_channel.h). Measured at fio 128 KiB sequential
  // reads, iodepth 8, inline placement, same build side by side: 4.0K ->
  // 6.7K IOPS (measured 2026-12-01); the 4 KiB jobs moved by less than
  // this machine's noise. TASKRUN_FLAG: the kernel flags pending
  // completions in the SQ ring, so every io_uring_submit (the early ones
  // within a round too) also collects them.
  params.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE |
                 IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  // Room for every entry's command, the wake read and the companion's
  // I/O of a round; a fuller round submits early (GetSqe).
  const uint32_t sq_entries =
      std::min<uint32_t>(depth + 2 + extra_sq_entries, 4096);
  params.cq_entries = 2 * sq_entries;
  int ret = io_uring_queue_init_params(sq_entries, &uring_, &params);
  if (ret < 0) return ErrnoError(-ret, "io_uring_setup for FUSE");
  ring_ready_ = true;
  fixed_buffers_ = std::make_unique<FixedBufferTable>(&uring_, arena);
  // Slot 0 is /dev/fuse; the rest start empty (-1) for the image files of
  // the engines that borrow the ring (AddFixedFiles).
  std::vector<int> files(kFixedFileSlots, -1);
  files[0] = fuse_fd;
  ret = io_uring_register_files(&uring_, files.data(), kFixedFileSlots);
  if (ret < 0) return ErrnoError(-ret, "io_uring_register_files (/dev/fuse)");
  fixed_files_ = {fuse_fd};
  header_bytes_ = size_t{depth} * kEntryHeaderBytes;
  payload_memory_bytes_ = size_t{depth} * payload_bytes;
  header_memory_ = mmap(nullptr, header_bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (arena != nullptr) {
    payload_memory_ = arena->QueueBase(qid_);
  } else {
    payload_memory_ =
        mmap(nullptr, payload_memory_bytes_, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    payload_owned_ = payload_memory_ != MAP_FAILED;
  }
  if (header_memory_ == MAP_FAILED || payload_memory_ == MAP_FAILED) {
    if (header_memory_ == MAP_FAILED) header_memory_ = nullptr;
    if (payload_memory_ == MAP_FAILED) payload_memory_ = nullptr;
    return ErrnoError(ENOMEM, "FUSE ring buffers");
  }
  entries_.resize(depth);
  for (uint32_t i = 0; i < depth; ++i) {
    UringEntry& entry = entries_[i];
    entry.header = reinterpret_cast<abi::fuse_uring_req_header*>(
        static_cast<uint8_t*>(header_memory_) + i * kEntryHeaderBytes);
    entry.payload =
        static_cast<uint8_t*>(payload_memory_) + size_t{i} * payload_bytes;
    entry.iov[0] = iovec{entry.header, sizeof(abi::fuse_uring_req_header)};
    entry.iov[1] = iovec{entry.payload, payload_bytes};
  }
  return absl::OkStatus();
}

io_uring_sqe* UringQueue::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&uring_);
  if (sqe == nullptr) {
    io_uring_submit(&uring_);
    sqe = io_uring_get_sqe(&uring_);
  }
  return sqe;
}

void UringQueue::QueueCommand(UringQueue& owner, uint32_t index, uint32_t cmd) {
  UringEntry& entry = owner.entries_[index];
  entry.holder = qid_;
  io_uring_sqe* sqe = GetSqe();
  if (sqe == nullptr) {
    LogInfo("FUSE queue %u: no submission slot; entry lost", owner.qid_);
    entry.state = EntryState::kDead;
    return;
  }
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));  // a 128-byte SQE
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->flags = IOSQE_FIXED_FILE;
  sqe->fd = 0;  // index into the registered files
  sqe->cmd_op = cmd;
  sqe->user_data = EntryTag(owner.qid_, index);
  auto* request = reinterpret_cast<abi::fuse_uring_cmd_req*>(sqe->cmd);
  request->qid = static_cast<uint16_t>(owner.qid_);
  if (cmd == abi::kUringCmdRegister) {
    sqe->addr = reinterpret_cast<uint64_t>(entry.iov);
    sqe->len = 2;
  } else {
    request->commit_id = entry.commit_id;
  }
  entry.last_cmd = cmd;
  entry.state = EntryState::kInKernel;
}

void UringQueue::RegisterEntries() {
  for (uint32_t i = 0; i < depth(); ++i) {
    QueueCommand(*this, i, abi::kUringCmdRegister);
  }
}

protocol::RawRequest UringQueue::TakeRequest(uint32_t index) {
  UringEntry& entry = entries_[index];
  entry.commit_id = entry.header->ring_ent_in_out.commit_id;
  entry.state = EntryState::kWithHandler;
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
  return raw;
}

size_t UringQueue::WriteReply(uint32_t index, uint64_t unique, int error,
                              std::span<const iovec> payload) {
  UringEntry& entry = entries_[index];
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
  return total;
}

void UringQueue::ArmWake() {
  io_uring_sqe* sqe = GetSqe();
  if (sqe == nullptr) return;
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));
  io_uring_prep_read(sqe, wake_fd_, &wake_value_, sizeof(wake_value_), 0);
  sqe->user_data = kWakeTag;
}

void UringQueue::Wake() {
  if (!wake_pending_.exchange(true, std::memory_order_acq_rel)) {
    uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  }
}

// With COOP_TASKRUN and TASKRUN_FLAG a completion waiting to be posted
// sets IORING_SQ_TASKRUN; the next io_uring_enter posts it. What the spin
// saves: the thread's wake-up from sleep (on this VM, a halted vCPU's) for
// a lone request's completion. Each turn yields the CPU: at the low depth
// that lets it spin, this thread runs on the CPU its requests come from,
// and the work that completes the I/O may need that CPU (a loop device's
// worker, librbd's threads). Measured at rr4k_qd1 on a loop device over
// tmpfs: a spin without the yield 0.34/0.48/0.50 of native, no spin
// 0.50/0.45/0.45, the yielding spin 0.53/0.52/0.50 and 0.76/0.55/0.52; on
// vda the yielding spin 0.59-0.61 against 0.54-0.61 (measured 2026-12-02).
bool UringQueue::SpinForCompletion(uint32_t us, const std::atomic<bool>& stop) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  do {
    if (HasWaitingCompletions()) return true;
    sched_yield();
  } while (std::chrono::steady_clock::now() < deadline &&
           !stop.load(std::memory_order_relaxed));
  return false;
}

bool UringQueue::HasWaitingCompletions() {
  return io_uring_cq_ready(&uring_) > 0 ||
         (IO_URING_READ_ONCE(*uring_.sq.kflags) & IORING_SQ_TASKRUN) != 0;
}

bool UringQueue::NeedsEnter() {
  return io_uring_sq_ready(&uring_) > 0 ||
         (IO_URING_READ_ONCE(*uring_.sq.kflags) &
          (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0;
}

uint32_t UringQueue::BorrowedInFlight() {
  uint32_t total = 0;
  for (const io::CqeSink* sink : sinks_) {
    if (sink != nullptr) total += sink->InFlight();
  }
  return total;
}

bool UringQueue::RouteToSink(uint64_t tag, int32_t res) {
  uint64_t index = tag >> kSinkBits;
  if (index == 0) return false;
  if (index <= sinks_.size() && sinks_[index - 1] != nullptr) {
    sinks_[index - 1]->OnCqe(tag, res);
  }
  return true;  // a sink gone since: nothing left to tell
}

uint64_t UringQueue::Lend(io::CqeSink* sink) {
  for (size_t i = 0; i < sinks_.size(); ++i) {
    if (sinks_[i] == nullptr) {
      sinks_[i] = sink;
      return uint64_t{i + 1} << kSinkBits;
    }
  }
  sinks_.push_back(sink);
  return uint64_t{sinks_.size()} << kSinkBits;
}

void UringQueue::Unlend(uint64_t tag) {
  uint64_t index = (tag >> kSinkBits) - 1;
  if (index < sinks_.size()) sinks_[index] = nullptr;
}

int UringQueue::AddFixedBuffers(const std::vector<iovec>& buffers) {
  return fixed_buffers_ ? fixed_buffers_->AddEngineBuffers(buffers) : -1;
}

int UringQueue::AddFixedFiles(const std::vector<int>& fds) {
  if (!ring_ready_ || fds.empty()) return -1;
  // A run of the same descriptors is the same files (an image keeps its
  // files open while the mount lives): an engine made again for them
  // reuses their slots. The update is done all the same, so that the slots
  // name what the descriptors are now.
  // Otherwise a run of emptied slots (a detached disk's) is taken before
  // new ones.
  size_t base = fixed_files_.size();
  auto run = std::search(fixed_files_.begin(), fixed_files_.end(), fds.begin(),
                         fds.end());
  if (run == fixed_files_.end()) {
    run = std::search_n(fixed_files_.begin() + 1, fixed_files_.end(),
                        fds.size(), -1);
  }
  if (run != fixed_files_.end()) {
    base = static_cast<size_t>(run - fixed_files_.begin());
  } else if (base + fds.size() > kFixedFileSlots) {
    return -1;
  }
  const int rc = io_uring_register_files_update(
      &uring_, static_cast<unsigned>(base), fds.data(),
      static_cast<unsigned>(fds.size()));
  if (rc < 0 || static_cast<size_t>(rc) != fds.size()) return -1;
  if (base == fixed_files_.size()) {
    fixed_files_.insert(fixed_files_.end(), fds.begin(), fds.end());
  } else {
    std::copy(fds.begin(), fds.end(), fixed_files_.begin() + base);
  }
  return static_cast<int>(base);
}

void UringQueue::RemoveFixedFiles(int base, size_t count) {
  // Slot 0 is /dev/fuse, never an engine's.
  if (!ring_ready_ || base < 1 ||
      static_cast<size_t>(base) + count > fixed_files_.size()) {
    return;
  }
  const std::vector<int> empty(count, -1);
  const int rc = io_uring_register_files_update(
      &uring_, static_cast<unsigned>(base), const_cast<int*>(empty.data()),
      static_cast<unsigned>(count));
  if (rc < 0) {
    LogInfo("FUSE queue %u: emptying fixed-file slots failed: %s", qid_,
            strerror(-rc));
    return;
  }
  std::fill_n(fixed_files_.begin() + base, count, -1);
}

int UringQueue::FixedBufferFor(const void* data, size_t length) {
  return fixed_buffers_ ? fixed_buffers_->ForPayload(data, length) : -1;
}

}  // namespace pvdisk::fuse::channel
