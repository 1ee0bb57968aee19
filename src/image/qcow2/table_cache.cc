#include "image/qcow2/table_cache.h"

#include <algorithm>

#include "image/qcow2/endian.h"

namespace pvdisk::image::qcow2 {

TableCache::TableCache(size_t capacity, size_t table_bytes)
    : capacity_(std::max<size_t>(capacity, 1)), table_bytes_(table_bytes) {}

TableCache::Slot* TableCache::Touch(uint64_t offset) {
  auto it = slots_.find(offset);
  if (it == slots_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return &it->second;
}

std::optional<uint64_t> TableCache::Entry64(uint64_t offset, uint64_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* slot = Touch(offset);
  if (slot == nullptr || (index + 1) * 8 > slot->table.size()) {
    return std::nullopt;
  }
  return LoadBe64(slot->table.data() + index * 8);
}

bool TableCache::Access(uint64_t offset,
                        absl::FunctionRef<void(std::span<uint8_t>)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* slot = Touch(offset);
  if (slot == nullptr) return false;
  fn(std::span<uint8_t>(slot->table));
  return true;
}

void TableCache::Insert(uint64_t offset, std::vector<uint8_t> table) {
  table.resize(table_bytes_, 0);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(offset);
  if (it != slots_.end()) {
    it->second.table = std::move(table);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  while (slots_.size() >= capacity_) {
    slots_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(offset);
  slots_.emplace(offset, Slot{std::move(table), lru_.begin()});
}

void TableCache::Erase(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(offset);
  if (it == slots_.end()) return;
  lru_.erase(it->second.lru);
  slots_.erase(it);
}

size_t TableCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}
uint64_t TableCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}
uint64_t TableCache::misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

}  // namespace pvdisk::image::qcow2
