// MetadataJournal: the metadata writes of a qcow2 image that are done in
// memory but not yet in the file, kept so that many changes reach the file
// together (group commit: one commit per flush instead of a flush per
// allocation) and in an order that keeps write_plan.h's crash-safe rules.
//
// Each write gets a stage. Within one change (Begin, then the Add of each
// of its plans) a write with barrier_before goes one stage after the write
// before it, so everything a write depends on lies in an earlier stage. A
// write that covers bytes an earlier write of the journal covers goes in
// that write's stage or a later one, so the newer bytes land last. A
// commit (Take) writes stage 0, makes it durable, writes stage 1, and so
// on: every barrier of every plan holds, with as many flushes as the
// deepest change has barriers (two for an allocating write: refcount, then
// L2 entry), however many changes the commit holds.
//
// I/O-free: the owner carries out what Take returns, and serializes calls.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "image/qcow2/write_plan.h"

namespace pvdisk::image::qcow2 {

class MetadataJournal {
 public:
  // The writes of one stage, in the order they were added (a later write
  // of the same bytes comes later).
  using Stage = std::vector<MetadataWrite>;

  // Starts a change: its first write goes in stage 0 (or later, if it
  // covers bytes of a later stage).
  void Begin() { cursor_ = 0; }
  // Adds the writes of `plan`, one of the current change's plans in order.
  void Add(const WritePlan& plan);

  bool empty() const { return writes_ == 0; }
  size_t writes() const { return writes_; }
  uint64_t bytes() const { return bytes_; }

  // Lays the journalled writes that fall inside [offset, offset +
  // table.size()) over `table`, bytes just read from the file there, in
  // the order a commit would write them: what the file will hold.
  void Overlay(uint64_t offset, std::span<uint8_t> table) const;

  // Everything journalled, by stage, and the journal emptied.
  std::vector<Stage> Take();

 private:
  std::vector<Stage> stages_;
  // The highest stage that writes each 8-byte word of the file.
  std::unordered_map<uint64_t, uint32_t> word_stage_;
  uint32_t cursor_ = 0;
  size_t writes_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace pvdisk::image::qcow2
