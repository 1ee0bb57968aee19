#include "fuse/channel/payload_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace pvdisk::fuse::channel {
namespace {

// The arena is aligned to a huge page so that its huge entries can be.
constexpr size_t kHugePage = kHugePageBytes;

constexpr const char* kThpMode = "/sys/kernel/mm/transparent_hugepage/enabled";

// Empty if MADV_HUGEPAGE can take effect here, else why not.
std::string WhyNoHugePages() {
  std::ifstream in(kThpMode);
  std::string mode;
  if (!in || !std::getline(in, mode)) {
    return "this kernel has no transparent huge pages";
  }
  if (mode.find("[never]") != std::string::npos) {
    return absl::StrCat("transparent huge pages are off (", kThpMode,
                        ": never)");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<PayloadArena>> PayloadArena::Create(
    uint32_t queues, uint32_t depth, uint32_t payload_bytes,
    uint32_t huge_entries) {
  if (queues == 0 || depth == 0 || payload_bytes == 0 ||
      payload_bytes % 4096 != 0 || huge_entries > depth) {
    return absl::InvalidArgumentError(
        "FUSE payload arena: queues, depth, a payload of whole pages and "
        "at most depth huge entries are needed");
  }
  const size_t bytes = size_t{queues} * depth * payload_bytes;
  // One huge page more than needed, then the unaligned ends given back.
  void* memory = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    return ErrnoError(errno, "mmap of the FUSE payload buffers");
  }
  uint8_t* raw = static_cast<uint8_t*>(memory);
  uint8_t* base = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) & ~(kHugePage - 1));
  if (base > raw) munmap(raw, base - raw);
  uint8_t* tail = base + bytes;
  uint8_t* raw_end = raw + bytes + kHugePage;
  if (raw_end > tail) munmap(tail, raw_end - tail);
  std::unique_ptr<PayloadArena> arena(
      new PayloadArena(base, bytes, queues, depth, payload_bytes));
  if (huge_entries > 0) arena->AdviseHugeEntries(huge_entries);
  return arena;
}

void PayloadArena::AdviseHugeEntries(uint32_t entries) {
  huge_note_ = WhyNoHugePages();
  if (!huge_note_.empty()) return;
  const uintptr_t arena_start = reinterpret_cast<uintptr_t>(base_);
  // Each queue may have as many bytes made huge as its huge entries take,
  // and at least one huge page (else a small --fuse-huge-entries would
  // allow none).
  auto promotion = std::make_unique<HugePromotion>(
      base_, bytes_, queues_, depth_, payload_bytes_,
      std::max(size_t{entries} * payload_bytes_, kHugePageBytes));
  for (uint32_t qid = 0; qid < queues_; ++qid) {
    // From the first huge entry, rounded down to a huge page (never below
    // the arena: the rounding only reaches the queue before's top entries,
    // which are advised too), to the queue's end.
    const uintptr_t queue_end = reinterpret_cast<uintptr_t>(
        QueueBase(qid) + size_t{depth_} * payload_bytes_);
    uintptr_t start = reinterpret_cast<uintptr_t>(
        QueueBase(qid) + size_t{depth_ - entries} * payload_bytes_);
    start = std::max(start & ~(kHugePage - 1), arena_start);
    if (madvise(reinterpret_cast<void*>(start), queue_end - start,
                MADV_HUGEPAGE) != 0) {
      huge_note_ = absl::StrCat("madvise(MADV_HUGEPAGE) of the FUSE payloads: ",
                                strerror(errno));
      madvise(base_, bytes_, MADV_NOHUGEPAGE);  // none then, not some
      return;
    }
    promotion->MarkHuge(start, queue_end);
  }
  huge_entries_ = entries;
  promotion_ = std::move(promotion);
}

PayloadArena::~PayloadArena() { munmap(base_, bytes_); }

}  // namespace pvdisk::fuse::channel
