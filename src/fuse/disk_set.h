// DiskSet: the disks a mount serves, which `pvdisk attach` and `pvdisk
// detach` change while the mount serves the others.
//
// Readers (every FUSE request) take no lock: the current table is one
// pointer, loaded with acquire, and a disk is used inside its slot's gate
// (an OperationsInFlight: one atomic increment and decrement around the
// handler's synchronous part). A change builds a new table and publishes it
// with one store; a detach then closes the slot's gate and waits for the
// handlers inside it to leave before the disk is shut down. So another
// disk's requests never wait for an attach or a detach.
//
// Memory: a reader may still hold an old table, or a slot of a detached
// disk (it is refused at the gate), so tables and slots are freed only with
// the DiskSet (a few dozen bytes per attach); the disk itself, its queues
// and image, go at detach.
//
// Inode numbers are never reused: a file handle of a detached disk can
// never reach a disk attached later under the same name.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuse/disk.h"
#include "fuse/disk_io.h"
#include "fuse/operations_in_flight.h"

namespace pvdisk::fuse {

// One disk of the mount, for as long as it is attached (the object itself
// lives as long as the DiskSet).
struct DiskSlot {
  uint64_t inode = 0;
  std::string name;
  std::unique_ptr<Disk> disk;
  std::unique_ptr<DiskIo> io;
  // The handlers using `disk` and `io` right now.
  OperationsInFlight gate;
  // The open file handles of the disk's file and the pid of the process
  // that opened each (the FUSE OPEN request's pid), for detach's EBUSY.
  std::mutex handles_mu;
  std::map<uint64_t, uint32_t> handles;
  uint64_t next_handle = 1;
  bool detaching = false;  // under handles_mu: no new handle
};

// A disk entered through its slot's gate: valid while the DiskRef lives.
class DiskRef {
 public:
  DiskRef() = default;
  explicit DiskRef(DiskSlot* slot) : slot_(slot) {}
  DiskRef(DiskRef&& other) noexcept : slot_(other.slot_) {
    other.slot_ = nullptr;
  }
  DiskRef& operator=(DiskRef&& other) noexcept {
    std::swap(slot_, other.slot_);
    return *this;
  }
  DiskRef(const DiskRef&) = delete;
  DiskRef& operator=(const DiskRef&) = delete;
  ~DiskRef() {
    if (slot_ != nullptr) slot_->gate.End();
  }

  explicit operator bool() const { return slot_ != nullptr; }
  Disk& disk() const { return *slot_->disk; }
  DiskIo& io() const { return *slot_->io; }
  uint64_t inode() const { return slot_->inode; }
  DiskSlot* slot() const { return slot_; }

 private:
  DiskSlot* slot_ = nullptr;
};

// A disk taken out of the set, to be shut down (Disk::Shutdown) before its
// DiskIo goes: operations in flight still use it.
struct DetachedDisk {
  std::unique_ptr<Disk> disk;
  std::unique_ptr<DiskIo> io;
};

class DiskSet {
 public:
  // The disks of the mount at its start, which must have been started.
  explicit DiskSet(std::vector<std::unique_ptr<Disk>> disks);
  // Frees every slot and table; the disks left are destroyed (Disk::
  // Shutdown first, which the caller has usually done).
  ~DiskSet();

  // The disk with inode `ino`, entered; empty if there is none (any more).
  DiskRef Enter(uint64_t ino) const;
  // The disk named `name`, entered; empty if there is none.
  DiskRef EnterByName(std::string_view name) const;
  // Every disk, entered, in the order they were attached.
  std::vector<DiskRef> EnterAll() const;
  // Whether `ino` is in the range of disk inodes (a detached disk's too).
  static bool IsDiskInode(uint64_t ino);

  // An open of the disk `ino` by process `pid`: the file handle, or
  // -ENOENT when the disk is gone or being detached.
  int64_t OpenHandle(uint64_t ino, uint32_t pid);
  void ReleaseHandle(uint64_t ino, uint64_t handle);

  // Control path: one change at a time (callers may be any thread).
  // Adds a started disk. AlreadyExists, naming it, if a disk has its name
  // (the disk is then shut down and freed).
  absl::Status Add(std::unique_ptr<Disk> disk);
  // Takes the disk `name` out: no new request or open reaches it, and the
  // handlers inside return; the caller then shuts it down. NotFound for no
  // such disk; Unavailable, naming the pids, when the disk's file is open
  // and `force` is not set (after a forced detach those handles' requests
  // fail with EIO); FailedPrecondition for a disk its placement cannot
  // give up (`can_detach` says why: empty for yes).
  absl::StatusOr<DetachedDisk> Remove(std::string_view name, bool force,
                                      std::string (*can_detach)(const Disk&));

  // Runs `shutdown` on every disk attached (the mount's end).
  template <typename F>
  void ForEachDisk(F shutdown) {
    std::lock_guard<std::mutex> lock(mu_);
    for (DiskSlot* slot : table_.load(std::memory_order_acquire)->order) {
      shutdown(*slot->disk);
    }
  }

 private:
  struct Table {
    // By inode - kFirstDiskInode; null for a detached disk.
    std::vector<DiskSlot*> by_id;
    std::vector<DiskSlot*> order;  // attached ones, oldest first
  };
  DiskSlot* SlotOf(uint64_t ino) const;
  void Publish(std::unique_ptr<Table> table);  // under mu_

  std::atomic<const Table*> table_{nullptr};
  std::mutex mu_;  // changes: Add, Remove, ForEachDisk
  std::vector<std::unique_ptr<Table>> tables_;
  std::vector<std::unique_ptr<DiskSlot>> slots_;
};

}  // namespace pvdisk::fuse
