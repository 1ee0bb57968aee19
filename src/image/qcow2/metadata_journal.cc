#include "image/qcow2/metadata_journal.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

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
    std::optional<Slot> only;  // the one last write of every word, if so
    bool same = true;
    for (uint64_t word = first; word <= last; ++word) {
      auto it = word_slot_.find(word);
      if (it == word_slot_.end()) {
        same = false;
        continue;
      }
      stage = std::max(stage, it->second.stage);
      if (!only) {
        only = it->second;
      } else if (only->stage != it->second.stage ||
                 only->index != it->second.index) {
        same = false;
      }
    }
    cursor_ = stage;
    if (same && only && only->stage == stage && Replace(w, *only)) {
      continue;
    }
    if (stages_.size() <= stage) stages_.resize(stage + 1);
    const Slot slot{stage, static_cast<uint32_t>(stages_[stage].size())};
    for (uint64_t word = first; word <= last; ++word) word_slot_[word] = slot;
    MetadataWrite copy = w;
    copy.barrier_before = false;
    stages_[stage].push_back(std::move(copy));
    ++writes_;
    bytes_ += w.bytes.size();
  }
}

bool MetadataJournal::Replace(const MetadataWrite& w, Slot slot) {
  // No later write touches these words (each one's last write is the one
  // at `slot`, in the stage `w` goes in), so taking its place leaves the
  // bytes appending would leave.
  MetadataWrite& old = stages_[slot.stage][slot.index];
  if (old.offset != w.offset || old.bytes.size() != w.bytes.size()) {
    return false;
  }
  std::memcpy(old.bytes.data(), w.bytes.data(), w.bytes.size());
  return true;
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
  word_slot_.clear();
  cursor_ = 0;
  writes_ = 0;
  bytes_ = 0;
  return out;
}

MetadataJournal::Stage Coalesce(MetadataJournal::Stage stage) {
  std::vector<size_t> order(stage.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return stage[a].offset < stage[b].offset;
  });
  MetadataJournal::Stage out;
  for (size_t i = 0; i < order.size();) {
    const uint64_t lo = stage[order[i]].offset;
    uint64_t hi = lo + stage[order[i]].bytes.size();
    size_t j = i + 1;
    while (j < order.size() && stage[order[j]].offset <= hi) {
      hi = std::max(hi, stage[order[j]].offset + stage[order[j]].bytes.size());
      ++j;
    }
    if (j == i + 1) {
      out.push_back(std::move(stage[order[i]]));
    } else {
      // The run's writes in the order they were added: later bytes last.
      std::vector<size_t> run(order.begin() + i, order.begin() + j);
      std::sort(run.begin(), run.end());
      MetadataWrite merged;
      merged.offset = lo;
      merged.bytes.resize(hi - lo);
      for (size_t k : run) {
        std::memcpy(merged.bytes.data() + (stage[k].offset - lo),
                    stage[k].bytes.data(), stage[k].bytes.size());
      }
      out.push_back(std::move(merged));
    }
    i = j;
  }
  return out;
}

}  // namespace pvdisk::image::qcow2
