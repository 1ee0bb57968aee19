#include "image/qcow2/metadata_journal.h"

#include <algorithm>
#include <cstring>

namespace pvdisk::image::qcow2 {

void MetadataJournal::Add(const WritePlan& plan) {
  for (const MetadataWrite& w : plan) {
    if (w.bytes.empty()) continue;
    // Earlier stages are durable before this one starts (and so is every
    // data write made before the commit), so the barrier holds.
    if (w.barrier_before) ++cursor_;
    const uint64_t first = w.offset / 8;
    const uint64_t last = (w.offset + w.bytes.size() - 1) / 8;
    uint32_t stage = cursor_;
    for (uint64_t word = first; word <= last; ++word) {
      auto it = word_stage_.find(word);
      if (it != word_stage_.end()) stage = std::max(stage, it->second);
    }
    for (uint64_t word = first; word <= last; ++word) {
      word_stage_[word] = stage;
    }
    cursor_ = stage;
    if (stages_.size() <= stage) stages_.resize(stage + 1);
    MetadataWrite copy = w;
    copy.barrier_before = false;
    stages_[stage].push_back(std::move(copy));
    ++writes_;
    bytes_ += w.bytes.size();
  }
}

void MetadataJournal::Overlay(uint64_t offset, std::span<uint8_t> table) const {
  const uint64_t end = offset + table.size();
  for (const Stage& stage : stages_) {
    for (const MetadataWrite& w : stage) {
      const uint64_t from = std::max(offset, w.offset);
      const uint64_t to = std::min(end, w.offset + w.bytes.size());
      if (from >= to) continue;
      std::memcpy(table.data() + (from - offset),
                  w.bytes.data() + (from - w.offset), to - from);
    }
  }
}

std::vector<MetadataJournal::Stage> MetadataJournal::Take() {
  std::vector<Stage> out = std::move(stages_);
  stages_.clear();
  word_stage_.clear();
  cursor_ = 0;
  writes_ = 0;
  bytes_ = 0;
  return out;
}

}  // namespace pvdisk::image::qcow2
