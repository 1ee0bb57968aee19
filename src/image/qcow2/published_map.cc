#include "image/qcow2/published_map.h"

#include <algorithm>
#include <bit>

namespace pvdisk::image::qcow2 {
namespace {

// A word: the host cluster (a multiple of 512) in the high bits, and below
// them: published, from an L2 table, writable in place, and the kind.
constexpr uint64_t kPublished = 1;
constexpr uint64_t kFromTable = 2;
constexpr uint64_t kWritable = 4;
constexpr int kKindShift = 3;  // 2 bits
constexpr uint64_t kKindMask = uint64_t{3} << kKindShift;
constexpr uint64_t kHostMask = ~uint64_t{511};

}  // namespace

PublishedMap::PublishedMap(uint64_t virtual_size, uint64_t l1_entries,
                           uint64_t l2_entries, uint64_t cluster_size)
    : virtual_size_(virtual_size),
      l1_entries_(l1_entries),
      l2_entries_(l2_entries),
      cluster_size_(cluster_size),
      cluster_bits_(std::countr_zero(cluster_size)),
      l2_bits_(std::countr_zero(l2_entries)),
      tables_(new std::atomic<std::atomic<uint64_t>*>[l1_entries]) {
  for (uint64_t i = 0; i < l1_entries_; ++i) {
    tables_[i].store(nullptr, std::memory_order_relaxed);
  }
}

PublishedMap::~PublishedMap() {
  for (uint64_t i = 0; i < l1_entries_; ++i) {
    delete[] tables_[i].load(std::memory_order_relaxed);
  }
}

std::optional<Mapping> PublishedMap::Find(uint64_t voff,
                                          bool& from_table) const {
  const uint64_t cluster = voff >> cluster_bits_;
  const uint64_t l1_index = cluster >> l2_bits_;
  if (l1_index >= l1_entries_) return std::nullopt;
  const std::atomic<uint64_t>* words = Words(l1_index);
  if (words == nullptr) return std::nullopt;
  const uint64_t word =
      words[cluster & (l2_entries_ - 1)].load(std::memory_order_acquire);
  if ((word & kPublished) == 0) return std::nullopt;
  const uint64_t within = voff & (cluster_size_ - 1);
  Mapping m;
  m.kind = static_cast<L2Kind>((word & kKindMask) >> kKindShift);
  m.bytes = std::min(cluster_size_ - within, virtual_size_ - voff);
  m.host_cluster = word & kHostMask;
  if (m.kind == L2Kind::kData) {
    m.host_offset = m.host_cluster + within;
    m.writable_in_place = (word & kWritable) != 0;
  }
  from_table = (word & kFromTable) != 0;
  return m;
}

void PublishedMap::Publish(uint64_t voff, const Mapping& m, bool from_table) {
  if (m.kind == L2Kind::kCompressed || m.host_cluster % 512 != 0) return;
  const uint64_t cluster = voff >> cluster_bits_;
  const uint64_t l1_index = cluster >> l2_bits_;
  if (l1_index >= l1_entries_) return;
  std::atomic<uint64_t>* words = Words(l1_index);
  if (words == nullptr) {
    auto* fresh = new std::atomic<uint64_t>[l2_entries_];
    for (uint64_t i = 0; i < l2_entries_; ++i) {
      fresh[i].store(0, std::memory_order_relaxed);
    }
    std::atomic<uint64_t>* expected = nullptr;
    if (tables_[l1_index].compare_exchange_strong(expected, fresh,
                                                  std::memory_order_acq_rel)) {
      words = fresh;
    } else {
      delete[] fresh;  // another publisher's array won
      words = expected;
    }
  }
  uint64_t word = m.host_cluster | kPublished |
                  (static_cast<uint64_t>(m.kind) << kKindShift);
  if (from_table) word |= kFromTable;
  if (m.writable_in_place) word |= kWritable;
  words[cluster & (l2_entries_ - 1)].store(word, std::memory_order_release);
}

void PublishedMap::Withdraw(uint64_t voff) {
  const uint64_t cluster = voff >> cluster_bits_;
  const uint64_t l1_index = cluster >> l2_bits_;
  if (l1_index >= l1_entries_) return;
  std::atomic<uint64_t>* words = Words(l1_index);
  if (words == nullptr) return;
  words[cluster & (l2_entries_ - 1)].store(0, std::memory_order_release);
}

}  // namespace pvdisk::image::qcow2
