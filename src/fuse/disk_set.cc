#include "fuse/disk_set.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fuse/inodes.h"

namespace pvdisk::fuse {

DiskSet::DiskSet(std::vector<std::unique_ptr<Disk>> disks) {
  auto table = std::make_unique<Table>();
  for (auto& disk : disks) {
    auto slot = std::make_unique<DiskSlot>();
    slot->inode = DiskInode(slots_.size());
    slot->name = disk->name();
    slot->io = std::make_unique<DiskIo>(disk.get());
    slot->disk = std::move(disk);
    table->by_id.push_back(slot.get());
    table->order.push_back(slot.get());
    slots_.push_back(std::move(slot));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Publish(std::move(table));
}

DiskSet::~DiskSet() {
  for (auto& slot : slots_) {
    slot->io.reset();
    slot->disk.reset();
  }
}

void DiskSet::Publish(std::unique_ptr<Table> table) {
  table_.store(table.get(), std::memory_order_release);
  tables_.push_back(std::move(table));
}

bool DiskSet::IsDiskInode(uint64_t ino) { return ino >= kFirstDiskInode; }

DiskSlot* DiskSet::SlotOf(uint64_t ino) const {
  if (ino < kFirstDiskInode) return nullptr;
  const Table* table = table_.load(std::memory_order_acquire);
  const uint64_t id = ino - kFirstDiskInode;
  return id < table->by_id.size() ? table->by_id[id] : nullptr;
}

DiskRef DiskSet::Enter(uint64_t ino) const {
  DiskSlot* slot = SlotOf(ino);
  if (slot == nullptr || !slot->gate.TryBegin()) return DiskRef();
  return DiskRef(slot);
}

DiskRef DiskSet::EnterByName(std::string_view name) const {
  for (DiskSlot* slot : table_.load(std::memory_order_acquire)->order) {
    if (slot->name == name && slot->gate.TryBegin()) return DiskRef(slot);
  }
  return DiskRef();
}

std::vector<DiskRef> DiskSet::EnterAll() const {
  std::vector<DiskRef> refs;
  for (DiskSlot* slot : table_.load(std::memory_order_acquire)->order) {
    if (slot->gate.TryBegin()) refs.emplace_back(slot);
  }
  return refs;
}

int64_t DiskSet::OpenHandle(uint64_t ino, uint32_t pid) {
  DiskSlot* slot = SlotOf(ino);
  if (slot == nullptr) return -ENOENT;
  std::lock_guard<std::mutex> lock(slot->handles_mu);
  if (slot->detaching) return -ENOENT;
  const uint64_t handle = slot->next_handle++;
  slot->handles[handle] = pid;
  return static_cast<int64_t>(handle);
}

void DiskSet::ReleaseHandle(uint64_t ino, uint64_t handle) {
  // A detached disk's handles are not looked at any more.
  DiskSlot* slot = SlotOf(ino);
  if (slot == nullptr) return;
  std::lock_guard<std::mutex> lock(slot->handles_mu);
  slot->handles.erase(handle);
}

absl::Status DiskSet::Add(std::unique_ptr<Disk> disk) {
  std::lock_guard<std::mutex> lock(mu_);
  const Table* current = table_.load(std::memory_order_acquire);
  for (const DiskSlot* slot : current->order) {
    if (slot->name == disk->name()) {
      disk->Shutdown();  // never served: nothing in flight
      return absl::AlreadyExistsError(absl::StrCat(
          "the mount already has a disk named ", disk->name(),
          " (detach it first, or attach an image of another name)"));
    }
  }
  auto slot = std::make_unique<DiskSlot>();
  slot->inode = DiskInode(slots_.size());
  slot->name = disk->name();
  slot->io = std::make_unique<DiskIo>(disk.get());
  slot->disk = std::move(disk);
  auto table = std::make_unique<Table>(*current);
  table->by_id.resize(slots_.size() + 1, nullptr);
  table->by_id.back() = slot.get();
  table->order.push_back(slot.get());
  slots_.push_back(std::move(slot));
  Publish(std::move(table));
  return absl::OkStatus();
}

absl::StatusOr<DetachedDisk> DiskSet::Remove(
    std::string_view name, bool force, std::string (*can_detach)(const Disk&)) {
  std::lock_guard<std::mutex> lock(mu_);
  const Table* current = table_.load(std::memory_order_acquire);
  DiskSlot* found = nullptr;
  std::vector<std::string> names;
  for (DiskSlot* slot : current->order) {
    names.push_back(slot->name);
    if (slot->name == name) found = slot;
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "the mount has no disk named ", std::string(name), "; it has ",
        names.empty() ? std::string("none") : absl::StrJoin(names, ", ")));
  }
  if (std::string why = can_detach(*found->disk); !why.empty()) {
    return absl::FailedPreconditionError(why);
  }
  {
    std::lock_guard<std::mutex> handles(found->handles_mu);
    if (!found->handles.empty() && !force) {
      std::vector<uint32_t> pids;
      for (const auto& [handle, pid] : found->handles) pids.push_back(pid);
      return absl::UnavailableError(absl::StrCat(
          "disk ", found->name, " is open (pid ", absl::StrJoin(pids, ", pid "),
          "): close it first, or detach with --force (its I/O then fails "
          "with EIO)"));
    }
    found->detaching = true;
  }
  auto table = std::make_unique<Table>(*current);
  table->by_id[found->inode - kFirstDiskInode] = nullptr;
  std::erase(table->order, found);
  Publish(std::move(table));
  // No reader can find the slot any more; those that did are let in or
  // refused by the gate, and the ones let in leave soon (a handler's
  // synchronous part, or a stats snapshot).
  found->gate.Close();
  found->gate.WaitForZero();
  DetachedDisk detached;
  detached.disk = std::move(found->disk);
  detached.io = std::move(found->io);
  return detached;
}

}  // namespace pvdisk::fuse
