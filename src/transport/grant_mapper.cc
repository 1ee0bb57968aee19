#include "transport/grant_mapper.h"

#include <sys/mman.h>

namespace pvdisk::transport {
namespace {

constexpr size_t kPageSize = 4096;

class PersistentGrants final : public GrantMapper {
 public:
  PersistentGrants(uint8_t* data, uint32_t data_pages, LentMemory lent)
      : data_(data), data_pages_(data_pages), lent_(lent) {}
  bool MapPages(uint32_t first, uint32_t count, PageMapping* out) override {
    // 64-bit sums: a stranger's page numbers may be near UINT32_MAX.
    const uint64_t end = uint64_t{first} + count;
    if (end <= data_pages_) {
      *out = PageMapping{data_ + size_t{first} * kPageSize, count, false};
      return true;
    }
    const uint64_t lent_first = LentFirstPage(data_pages_);
    if (first >= lent_first && end - lent_first <= lent_.pages()) {
      *out = PageMapping{lent_.base + size_t{first - lent_first} * kPageSize,
                         count, false};
      return true;
    }
    return false;  // past the end, the gap, or across
  }
  void UnmapPages(const PageMapping&) override {}
  bool persistent() const override { return true; }

 private:
  uint8_t* data_;
  uint32_t data_pages_;
  LentMemory lent_;
};

class PerRequestGrants final : public GrantMapper {
 public:
  PerRequestGrants(const SharedRegion* region, size_t data_offset,
                   stats::QueueStats* stats)
      : region_(region), data_offset_(data_offset), stats_(stats) {}

  bool MapPages(uint32_t first, uint32_t count, PageMapping* out) override {
    size_t length = size_t{count} * kPageSize;
    void* address =
        mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, region_->fd(),
             static_cast<off_t>(data_offset_ + size_t{first} * kPageSize));
    if (address == MAP_FAILED) return false;
    stats_->Add(stats::Counter::grant_maps, count);
    *out = PageMapping{static_cast<uint8_t*>(address), count, true};
    return true;
  }
  void UnmapPages(const PageMapping& mapping) override {
    if (!mapping.owned) return;
    munmap(mapping.address, size_t{mapping.pages} * kPageSize);
    stats_->Add(stats::Counter::grant_unmaps, mapping.pages);
  }
  bool persistent() const override { return false; }

 private:
  const SharedRegion* region_;
  size_t data_offset_;
  stats::QueueStats* stats_;
};

}  // namespace

std::unique_ptr<GrantMapper> NewPersistentGrants(uint8_t* data,
                                                 uint32_t data_pages,
                                                 LentMemory lent) {
  return std::make_unique<PersistentGrants>(data, data_pages, lent);
}

std::unique_ptr<GrantMapper> NewPerRequestGrants(const SharedRegion* region,
                                                 size_t data_offset,
                                                 stats::QueueStats* stats) {
  return std::make_unique<PerRequestGrants>(region, data_offset, stats);
}

}  // namespace pvdisk::transport
