#include "fuse/fuse_ops.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/event_log.h"
#include "base/kernel_ordered.h"
#include "fuse/attributes.h"
#include "fuse/disk_control.h"
#include "fuse/disk_io.h"
#include "fuse/disk_set.h"
#include "fuse/filesystem.h"
#include "fuse/inodes.h"
#include "fuse/stats_snapshot.h"
#include "stats/clock.h"
#include "stats/counters.h"
#include "stats/stats_command.h"
#include "trace/trace_control.h"

namespace pvdisk::fuse {
namespace {

using protocol::Reply;
using protocol::Request;
using stats::Counter;

// Disks never change size, so the kernel may cache their attributes.
constexpr double kDiskAttrTimeout = 60.0;
constexpr double kStatsAttrTimeout = 1.0;

const timespec& MountTime() {
  static const timespec now = [] {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t;
  }();
  return now;
}

bool IsStatsInode(uint64_t ino) {
  return ino == kStatsInode || ino == kStatsJsonInode || ino == kMetricsInode;
}

// The attributes of `ino` (see attributes.h for who may do what) and how
// long the kernel may cache them; false if there is no such inode.
// `entry_timeout`: how long the kernel may keep a name's inode. A disk's
// name may come back as another disk (detach, then attach), so the kernel
// looks disk names up again at every open (a LOOKUP per open, none per
// I/O).
bool Attributes(Filesystem& fs, uint64_t ino, struct stat* st, double* timeout,
                double* entry_timeout = nullptr) {
  static const MountOwner owner = CurrentMountOwner();
  Node node = Node::kDisk;
  const Disk* disk = nullptr;
  *timeout = kStatsAttrTimeout;
  if (entry_timeout != nullptr) *entry_timeout = kStatsAttrTimeout;
  std::vector<DiskRef> all;
  std::vector<const Disk*> disks;
  DiskRef one;
  if (ino == kRootInode || ino == kStatsInode || ino == kStatsJsonInode ||
      ino == kMetricsInode) {
    all = fs.disks().EnterAll();
    for (const DiskRef& ref : all) disks.push_back(&ref.disk());
  }
  if (ino == kRootInode) {
    node = Node::kRoot;
  } else if (ino == kStatsInode) {
    node = Node::kStats;
  } else if (ino == kStatsJsonInode || ino == kMetricsInode) {
    node = Node::kStatsJson;  // read-only, like stats.json
  } else if (ino == kTraceInode || ino == kControlInode) {
    node = Node::kTrace;  // the owner's only, 0600
  } else {
    one = fs.disks().Enter(ino);
    if (!one) return false;
    disk = &one.disk();
    *timeout = kDiskAttrTimeout;
    if (entry_timeout != nullptr) *entry_timeout = 0;
  }
  FillAttributes(node, disk, disks, owner, MountTime(), st);
  st->st_ino = ino;
  return true;
}

void ReplyEntry(Reply reply, Filesystem& fs, uint64_t ino) {
  struct stat st;
  double timeout;
  double entry_timeout;
  if (!Attributes(fs, ino, &st, &timeout, &entry_timeout)) {
    return reply.Error(ENOENT);
  }
  reply.Struct(protocol::EntryOut(ino, st, entry_timeout, timeout));
}

// The errno for a request on an inode that is no disk (any more): EIO for
// a detached disk's (a handle kept across a forced detach), else `other`.
int Gone(uint64_t ino, int other) {
  return DiskSet::IsDiskInode(ino) ? EIO : other;
}

void ReplyAttr(Reply reply, Filesystem& fs, uint64_t ino) {
  struct stat st;
  double timeout;
  if (!Attributes(fs, ino, &st, &timeout)) return reply.Error(ENOENT);
  reply.Struct(protocol::AttrOut(st, timeout));
}

// A reply that ends an I/O with only a status.
void ReplyStatus(Reply& reply, int64_t result) {
  reply.Error(result < 0 ? static_cast<int>(-result) : 0);
}

// DiskIo's callbacks are std::functions, which must be copyable; the Reply
// they answer is move-only, so they share it. (Flush and fallocate only:
// reads and writes carry their Reply in their own op, below.)
std::shared_ptr<Reply> Share(Reply reply) {
  return std::make_shared<Reply>(std::move(reply));
}

// A FUSE READ or WRITE of a disk from its request to its reply, in the one
// object it allocates: the DiskIo op (`Op`, the block request itself), the
// Reply and the latency stamp.
template <typename Op>
class Replying : public Op {
 public:
  Replying(Reply reply, transport::Queue& queue)
      : reply_(std::move(reply)),
        stats_(&queue.stats()),
        trace_(&queue.trace()),
        start_(stats::MonotonicNanos()) {}

 protected:
  // After the reply: the latency, and the trace's reply step (which
  // carries when the request arrived, for the timeline's FUSE wait).
  void RecordLatency(stats::Direction direction) {
    stats_->RecordLatency(direction, stats::MonotonicNanos() - start_);
    if (__builtin_expect(trace_->on(), 0)) {
      trace::TraceEvent event;
      event.action = trace::TraceAction::kReply;
      event.flags = static_cast<uint8_t>(this->op);
      event.sector = this->sector;
      event.bytes = static_cast<uint32_t>(this->num_sectors * 512);
      event.io = reinterpret_cast<uintptr_t>(
          static_cast<const transport::BlockIo*>(this));
      event.aux = start_;
      trace_->Record(event);
    }
  }

  Reply reply_;

 private:
  stats::QueueStats* stats_;
  trace::QueueTrace* trace_;
  uint64_t start_;
};

class ReplyingRead final : public Replying<DiskIo::ReadOp> {
 public:
  using Replying::Replying;
  void ReadDone(int64_t result, absl::Span<const iovec> data) override {
    if (result < 0) {
      ReplyStatus(reply_, result);
    } else {
      reply_.Data(std::span<const iovec>(data.data(), data.size()));
    }
    RecordLatency(stats::Direction::kRead);
    delete this;
  }
};

class ReplyingWrite final : public Replying<DiskIo::WriteOp> {
 public:
  using Replying::Replying;
  void WriteDone(int64_t result) override {
    if (result < 0) {
      ReplyStatus(reply_, result);
    } else {
      reply_.Struct(protocol::WriteOut(static_cast<uint32_t>(result)));
    }
    RecordLatency(stats::Direction::kWrite);
    delete this;
  }
};

}  // namespace

void FilesystemHandler::Lookup(const Request& request, Reply reply) {
  if (request.nodeid != kRootInode) return reply.Error(ENOENT);
  std::string_view wanted = request.name;
  if (wanted == kStatsName)
    return ReplyEntry(std::move(reply), fs_, kStatsInode);
  if (wanted == kStatsJsonName) {
    return ReplyEntry(std::move(reply), fs_, kStatsJsonInode);
  }
  if (wanted == kMetricsName) {
    return ReplyEntry(std::move(reply), fs_, kMetricsInode);
  }
  if (wanted == trace::kTraceName) {
    return ReplyEntry(std::move(reply), fs_, kTraceInode);
  }
  if (wanted == kControlName) {
    return ReplyEntry(std::move(reply), fs_, kControlInode);
  }
  uint64_t ino = 0;
  if (DiskRef disk = fs_.disks().EnterByName(wanted)) ino = disk.inode();
  if (ino == 0) return reply.Error(ENOENT);
  ReplyEntry(std::move(reply), fs_, ino);
}

void FilesystemHandler::Getattr(const Request& request, Reply reply) {
  ReplyAttr(std::move(reply), fs_, request.nodeid);
}

void FilesystemHandler::Setattr(const Request& request, Reply reply) {
  uint64_t ino = request.nodeid;
  if (request.setattr.valid & abi::kFattrSize) {
    uint64_t size = request.setattr.size;
    DiskRef disk = fs_.disks().Enter(ino);
    // A disk keeps its size; truncating the stats or control file is a
    // no-op.
    bool same_size = disk && size == disk.disk().size_bytes();
    bool file_truncate =
        (ino == kStatsInode || ino == kControlInode) && size == 0;
    if (!same_size && !file_truncate) {
      return reply.Error(disk ? EINVAL : EACCES);
    }
  }
  // Owner, mode and time changes are accepted and ignored: the attributes
  // describe the disk, not a file that keeps them.
  ReplyAttr(std::move(reply), fs_, ino);
}

void FilesystemHandler::Readdir(const Request& request, Reply reply) {
  if (request.nodeid != kRootInode) return reply.Error(ENOTDIR);
  struct Entry {
    std::string name;
    uint64_t ino;
  };
  std::vector<Entry> entries = {{".", kRootInode},
                                {"..", kRootInode},
                                {kStatsName, kStatsInode},
                                {kStatsJsonName, kStatsJsonInode},
                                {kMetricsName, kMetricsInode}};
  for (const DiskRef& disk : fs_.disks().EnterAll()) {
    entries.push_back({disk.disk().name(), disk.inode()});
  }
  std::vector<uint8_t> buffer(request.size);
  size_t used = 0;
  for (uint64_t i = request.offset; i < entries.size(); ++i) {
    struct stat st;
    double timeout;
    Attributes(fs_, entries[i].ino, &st, &timeout);
    if (!protocol::AddDirent(buffer, &used, entries[i].name, entries[i].ino,
                             st.st_mode, i + 1)) {
      break;
    }
  }
  reply.Bytes(buffer.data(), used);
}

void FilesystemHandler::Open(const Request& request, Reply reply) {
  uint64_t ino = request.nodeid;
  int access = static_cast<int>(request.flags) & O_ACCMODE;
  if (IsStatsInode(ino)) {
    if (ino != kStatsInode && access != O_RDONLY) return reply.Error(EACCES);
    // Snapshot at open, so one reader sees one consistent table.
    uint64_t handle =
        StatsSnapshot::Open(ino == kStatsInode       ? fs_.StatsText()
                            : ino == kStatsJsonInode ? fs_.StatsJson()
                                                     : fs_.MetricsText());
    return reply.Struct(protocol::OpenOut(handle, abi::kFopenDirectIo));
  }
  if (ino == kTraceInode) {
    return reply.Struct(
        protocol::OpenOut(fs_.trace_control().Open(),
                          abi::kFopenDirectIo | abi::kFopenNonseekable));
  }
  if (ino == kControlInode) {
    // The mount's owner only, whoever else the file's mode lets in (root).
    if (request.uid != CurrentMountOwner().uid) return reply.Error(EACCES);
    auto* handle = new ControlHandle;
    KernelOrderedRelease(handle);
    return reply.Struct(
        protocol::OpenOut(reinterpret_cast<uint64_t>(handle),
                          abi::kFopenDirectIo | abi::kFopenNonseekable));
  }
  {
    DiskRef disk = fs_.disks().Enter(ino);
    if (!disk) return reply.Error(ino == kRootInode ? EISDIR : ENOENT);
    if (access != O_RDONLY && disk.disk().read_only()) {
      LogEvent(Event::kRefusedWrite, disk.disk().name(), "",
               "an open for writing of a read-only disk; answered EROFS");
      return reply.Error(EROFS);
    }
  }
  // The handle remembers who opened the disk, for detach's EBUSY.
  const int64_t handle = fs_.disks().OpenHandle(ino, request.pid);
  if (handle < 0) return reply.Error(static_cast<int>(-handle));
  // Direct I/O: no page cache. Parallel direct writes: writes that do not
  // extend the file (none can) take the inode lock shared, so writes to one
  // disk are not serialised in the kernel; DiskIo orders the unaligned ones
  // that overlap.
  reply.Struct(
      protocol::OpenOut(static_cast<uint64_t>(handle),
                        abi::kFopenDirectIo | abi::kFopenParallelDirectWrites));
}

void FilesystemHandler::Release(const Request& request, Reply reply) {
  if (IsStatsInode(request.nodeid)) {
    StatsSnapshot::Release(request.fh);
  }
  if (request.nodeid == kTraceInode) fs_.trace_control().Release(request.fh);
  if (request.nodeid == kControlInode) {
    auto* handle = reinterpret_cast<ControlHandle*>(request.fh);
    KernelOrderedAcquire(handle);
    delete handle;
  }
  if (DiskSet::IsDiskInode(request.nodeid)) {
    fs_.disks().ReleaseHandle(request.nodeid, request.fh);
  }
  reply.Ok();
}

void FilesystemHandler::Read(const Request& request, Reply reply) {
  uint64_t ino = request.nodeid;
  if (IsStatsInode(ino)) {
    std::string piece =
        StatsSnapshot::Read(request.fh, request.offset, request.size);
    return reply.Bytes(piece.data(), piece.size());
  }
  if (ino == kTraceInode) {
    std::string events;
    int read = fs_.trace_control().Read(request.fh, request.size, &events);
    if (read < 0) return reply.Error(-read);
    return reply.Bytes(events.data(), events.size());
  }
  if (ino == kControlInode) {
    auto* handle = reinterpret_cast<ControlHandle*>(request.fh);
    std::string answer;
    {
      std::lock_guard<std::mutex> lock(handle->mu);
      answer = handle->answer;
    }
    // Nonseekable: every read gets the whole answer, which is short.
    answer.resize(std::min<size_t>(answer.size(), request.size));
    return reply.Bytes(answer.data(), answer.size());
  }
  DiskRef disk = fs_.disks().Enter(ino);
  if (!disk) return reply.Error(Gone(ino, ENOENT));
  transport::Queue& queue = disk.disk().QueueFor(request.offset / 512);
  queue.stats().Add(Counter::fuse_reads);
  std::span<uint8_t> into = reply.PayloadBuffer();
  disk.io().Read(queue, request.offset, request.size, into,
                 new ReplyingRead(std::move(reply), queue));
}

void FilesystemHandler::Write(const Request& request, Reply reply) {
  uint64_t ino = request.nodeid;
  if (ino == kStatsInode) {
    absl::string_view command(
        reinterpret_cast<const char*>(request.data.data()),
        request.data.size());
    absl::StatusOr<stats::StatsRequest> parsed =
        stats::ParseStatsRequest(command);
    if (!parsed.ok()) return reply.Error(EINVAL);
    if (parsed->command == stats::StatsCommand::kReset) {
      fs_.ResetStats();
    } else if (parsed->command == stats::StatsCommand::kMark) {
      if (int marked = fs_.Mark(*parsed); marked < 0) {
        return reply.Error(-marked);
      }
    } else if (int cut = fs_.PowerCut(*parsed); cut < 0) {
      return reply.Error(-cut);
    }
    return reply.Struct(
        protocol::WriteOut(static_cast<uint32_t>(request.data.size())));
  }
  if (ino == kTraceInode) {
    // "block NAME" or "all NAME", as the trace command writes it.
    std::string_view command(reinterpret_cast<const char*>(request.data.data()),
                             request.data.size());
    int selected = fs_.trace_control().Select(request.fh, command);
    if (selected < 0) return reply.Error(-selected);
    return reply.Struct(
        protocol::WriteOut(static_cast<uint32_t>(request.data.size())));
  }
  if (ino == kControlInode) {
    auto* handle = reinterpret_cast<ControlHandle*>(request.fh);
    const uint32_t length = static_cast<uint32_t>(request.data.size());
    absl::StatusOr<ControlRequest> parsed = ParseControlRequest(
        std::string_view(reinterpret_cast<const char*>(request.data.data()),
                         request.data.size()));
    auto answer = [handle, length](Reply reply, const absl::Status& status) {
      {
        std::lock_guard<std::mutex> lock(handle->mu);
        handle->answer = status.ok() ? std::string("ok\n")
                                     : absl::StrCat(status.message(), "\n");
      }
      if (status.ok()) return reply.Struct(protocol::WriteOut(length));
      reply.Error(ControlErrno(status));
    };
    if (!parsed.ok()) return answer(std::move(reply), parsed.status());
    // The command runs on the control thread; the kernel keeps this handle
    // open until the write's reply.
    return fs_.RunControl(
        std::move(*parsed),
        [answer, reply = Share(std::move(reply))](absl::Status status) {
          answer(std::move(*reply), status);
        });
  }
  DiskRef disk = fs_.disks().Enter(ino);
  if (!disk) return reply.Error(Gone(ino, EACCES));
  transport::Queue& queue = disk.disk().QueueFor(request.offset / 512);
  queue.stats().Add(Counter::fuse_writes);
  disk.io().Write(queue, request.offset, request.data.data(),
                  request.data.size(),
                  new ReplyingWrite(std::move(reply), queue));
}

void FilesystemHandler::Flush(const Request&, Reply reply) {
  // close() does not make data durable on a block device either; fsync does.
  reply.Ok();
}

void FilesystemHandler::Fsync(const Request& request, Reply reply) {
  DiskRef disk = fs_.disks().Enter(request.nodeid);
  if (!disk) {
    // Nothing to make durable, unless the disk was detached under it.
    return reply.Error(DiskSet::IsDiskInode(request.nodeid) ? EIO : 0);
  }
  disk.io().Flush(disk.disk().QueueFor(0),
                  [reply = Share(std::move(reply))](int64_t result) {
                    ReplyStatus(*reply, result);
                  });
}

void FilesystemHandler::Fallocate(const Request& request, Reply reply) {
  DiskRef ref = fs_.disks().Enter(request.nodeid);
  if (!ref) return reply.Error(Gone(request.nodeid, EOPNOTSUPP));
  uint64_t offset = request.offset;
  uint64_t length = request.length;
  if (length == 0) return reply.Error(EINVAL);
  Disk& disk = ref.disk();
  if (disk.read_only()) {
    LogEvent(Event::kRefusedWrite, disk.name(), "",
             "a fallocate of a read-only disk; answered EROFS");
    return reply.Error(EROFS);
  }
  int mode = static_cast<int>(request.flags);
  bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
  int action = mode & ~FALLOC_FL_KEEP_SIZE;
  if (!keep_size && offset + length > disk.size_bytes()) {
    return reply.Error(ENOSPC);  // a disk cannot grow
  }
  auto done = [reply = Share(std::move(reply))](int64_t result) {
    ReplyStatus(*reply, result);
  };
  switch (action) {
    case 0:
      // Plain allocation: every sector of a disk already exists.
      return done(0);
    case FALLOC_FL_PUNCH_HOLE:
      if (!keep_size) return done(-EINVAL);  // the kernel's rule
      return ref.io().Zero(disk.QueueFor(offset / 512), offset, length,
                           /*deallocate=*/true, done);
    case FALLOC_FL_ZERO_RANGE:
      return ref.io().Zero(disk.QueueFor(offset / 512), offset, length,
                           /*deallocate=*/false, done);
    default:
      return done(-EOPNOTSUPP);
  }
}

void FilesystemHandler::Statfs(const Request&, Reply reply) {
  uint64_t total = 0;
  std::vector<DiskRef> disks = fs_.disks().EnterAll();
  for (const DiskRef& disk : disks) total += disk.disk().size_bytes();
  abi::fuse_statfs_out out{};
  out.st.bsize = 4096;
  out.st.frsize = 4096;
  out.st.blocks = total / 4096;
  out.st.files = disks.size() + 3;
  out.st.namelen = 255;
  reply.Struct(out);
}

}  // namespace pvdisk::fuse
