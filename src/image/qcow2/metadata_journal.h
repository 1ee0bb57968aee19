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
// A write of exactly the bytes of the last journalled write of those bytes,
// in that write's stage, replaces it instead of adding one: rewriting an
// entry again and again (with extended L2 entries, each first write into
// another subcluster of a cluster) keeps one write of it, not one per
// change. Coalesce turns a stage's writes into as few as there are runs of
// touching bytes, for the commit to carry out.
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
  // Where a write sits: its stage, and its index in that stage.
  struct Slot {
    uint32_t stage = 0;
    uint32_t index = 0;
  };
  // Whether `w` rewrites exactly the bytes of the write at `slot`, the last
  // write of each of its words; if so, takes its bytes there.
  bool Replace(const MetadataWrite& w, Slot slot);

  std::vector<Stage> stages_;
  // The last write of each 8-byte word of the file (so also the highest
  // stage that writes it).
  std::unordered_map<uint64_t, Slot> word_slot_;
  uint32_t cursor_ = 0;
  size_t writes_ = 0;
  uint64_t bytes_ = 0;
};

// The writes of `stage` as fewer, in offset order: writes whose bytes
// overlap or touch become one, the bytes of a later write over an earlier
// one's. Writing them leaves what writing `stage` in order leaves (the
// writes of one stage need no order but that of overlapping bytes).
MetadataJournal::Stage Coalesce(MetadataJournal::Stage stage);

}  // namespace pvdisk::image::qcow2
