// PublishedMap: the mappings of one qcow2 layer's clusters, published for
// readers that take them without a lock: one array of 64-bit words per L1
// entry, allocated on first use and published with an atomic pointer, one
// word per cluster (0: not published). A reader loads the word; the
// owner's lock is taken only for a cluster not published yet.
//
// Contract with the owner (qcow2_state.h): Publish runs with the metadata
// lock held (shared is enough: two publishers of one cluster publish the
// same mapping), and whoever changes an L2 entry withdraws the cluster's
// word while holding the lock exclusively. A reader that loaded the word
// just before a withdrawal uses the mapping of a moment ago, as a reader
// that mapped under the lock and issued its I/O after releasing it does.
//
// Only mappings that stay valid until withdrawn are published: data (its
// cluster wholly inside the file), zero and unallocated clusters; never a
// compressed cluster or a refused entry.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "image/qcow2/mapping.h"

namespace pvdisk::image::qcow2 {

class PublishedMap {
 public:
  // For a layer of `virtual_size` bytes with `l1_entries` L1 entries of
  // `l2_entries` clusters of `cluster_size` bytes each (both powers of
  // two, as a valid header has them).
  PublishedMap(uint64_t virtual_size, uint64_t l1_entries, uint64_t l2_entries,
               uint64_t cluster_size);
  ~PublishedMap();
  PublishedMap(const PublishedMap&) = delete;
  PublishedMap& operator=(const PublishedMap&) = delete;

  // The mapping of `voff` (below the virtual size) if its cluster's is
  // published; `from_table` says whether an L2 table holds it (an L2 hit).
  std::optional<Mapping> Find(uint64_t voff, bool& from_table) const;
  // Publishes `m`, the mapping of the cluster of `voff`, if it is one of
  // the kinds above; `from_table` as Find returns it.
  void Publish(uint64_t voff, const Mapping& m, bool from_table);
  // Withdraws the cluster of `voff`.
  void Withdraw(uint64_t voff);

 private:
  std::atomic<uint64_t>* Words(uint64_t l1_index) const {
    return tables_[l1_index].load(std::memory_order_acquire);
  }

  const uint64_t virtual_size_;
  const uint64_t l1_entries_;
  const uint64_t l2_entries_;
  const uint64_t cluster_size_;
  // Both are powers of two: shifts instead of divisions on the hot path.
  const int cluster_bits_;
  const int l2_bits_;
  std::unique_ptr<std::atomic<std::atomic<uint64_t>*>[]> tables_;
};

}  // namespace pvdisk::image::qcow2
