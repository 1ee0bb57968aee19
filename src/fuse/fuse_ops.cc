#include "fuse/fuse_ops.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/event_log.h"
#include "fuse/attributes.h"
#include "fuse/disk_io.h"
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

// Index of the disk behind `ino`, or -1.
long DiskIndex(Filesystem& fs, uint64_t ino) {
  if (ino < kFirstDiskInode) return -1;
  uint64_t index = ino - kFirstDiskInode;
  return index < fs.disk_count() ? static_cast<long>(index) : -1;
}

bool IsStatsInode(uint64_t ino) {
  return ino == kStatsInode || ino == kStatsJsonInode || ino == kMetricsInode;
}

// The attributes of `ino` (see attributes.h for who may do what) and how
// long the kernel may cache them; false if there is no such inode.
bool Attributes(Filesystem& fs, uint64_t ino, struct stat* st,
                double* timeout) {
  static const MountOwner owner = CurrentMountOwner();
  std::vector<const Disk*> disks;
  for (size_t i = 0; i < fs.disk_count(); ++i) disks.push_back(&fs.disk(i));
  Node node = Node::kDisk;
  const Disk* disk = nullptr;
  *timeout = kStatsAttrTimeout;
  if (ino == kRootInode) {
    node = Node::kRoot;
  } else if (ino == kStatsInode) {
    node = Node::kStats;
  } else if (ino == kStatsJsonInode || ino == kMetricsInode) {
    node = Node::kStatsJson;  // read-only, like stats.json
  } else if (ino == kTraceInode) {
    node = Node::kTrace;
  } else {
    long index = DiskIndex(fs, ino);
    if (index < 0) return false;
    disk = &fs.disk(index);
    *timeout = kDiskAttrTimeout;
  }
  FillAttributes(node, disk, disks, owner, MountTime(), st);
  st->st_ino = ino;
  return true;
}

void ReplyEntry(Reply reply, Filesystem& fs, uint64_t ino) {
  struct stat st;
  double timeout;
  if (!Attributes(fs, ino, &st, &timeout)) return reply.Error(ENOENT);
  reply.Struct(protocol::EntryOut(ino, st, timeout));
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
  for (size_t i = 0; i < fs_.disk_count(); ++i) {
    if (fs_.disk(i).name() == wanted) {
      return ReplyEntry(std::move(reply), fs_, DiskInode(i));
    }
  }
  reply.Error(ENOENT);
}

void FilesystemHandler::Getattr(const Request& request, Reply reply) {
  ReplyAttr(std::move(reply), fs_, request.nodeid);
}

void FilesystemHandler::Setattr(const Request& request, Reply reply) {
  uint64_t ino = request.nodeid;
  if (request.setattr.valid & abi::kFattrSize) {
    uint64_t size = request.setattr.size;
    long index = DiskIndex(fs_, ino);
    // A disk keeps its size; truncating the stats file is a no-op.
    bool same_size = index >= 0 && size == fs_.disk(index).size_bytes();
    bool stats_truncate = ino == kStatsInode && size == 0;
    if (!same_size && !stats_truncate) {
      return reply.Error(index >= 0 ? EINVAL : EACCES);
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
  for (size_t i = 0; i < fs_.disk_count(); ++i) {
    entries.push_back({fs_.disk(i).name(), DiskInode(i)});
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
  long index = DiskIndex(fs_, ino);
  if (index < 0) return reply.Error(ino == kRootInode ? EISDIR : ENOENT);
  if (access != O_RDONLY && fs_.disk(index).read_only()) {
    LogEvent(Event::kRefusedWrite, fs_.disk(index).name(), "",
             "an open for writing of a read-only disk; answered EROFS");
    return reply.Error(EROFS);
  }
  // Direct I/O: no page cache. Parallel direct writes: writes that do not
  // extend the file (none can) take the inode lock shared, so writes to one
  // disk are not serialised in the kernel; DiskIo orders the unaligned ones
  // that overlap.
  reply.Struct(protocol::OpenOut(
      0, abi::kFopenDirectIo | abi::kFopenParallelDirectWrites));
}

void FilesystemHandler::Release(const Request& request, Reply reply) {
  if (IsStatsInode(request.nodeid)) {
    StatsSnapshot::Release(request.fh);
  }
  if (request.nodeid == kTraceInode) fs_.trace_control().Release(request.fh);
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
  long index = DiskIndex(fs_, ino);
  if (index < 0) return reply.Error(ENOENT);
  transport::Queue& queue = fs_.disk(index).QueueFor(request.offset / 512);
  queue.stats().Add(Counter::fuse_reads);
  std::span<uint8_t> into = reply.PayloadBuffer();
  fs_.disk_io(index).Read(queue, request.offset, request.size, into,
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
  long index = DiskIndex(fs_, ino);
  if (index < 0) return reply.Error(EACCES);
  transport::Queue& queue = fs_.disk(index).QueueFor(request.offset / 512);
  queue.stats().Add(Counter::fuse_writes);
  fs_.disk_io(index).Write(queue, request.offset, request.data.data(),
                           request.data.size(),
                           new ReplyingWrite(std::move(reply), queue));
}

void FilesystemHandler::Flush(const Request&, Reply reply) {
  // close() does not make data durable on a block device either; fsync does.
  reply.Ok();
}

void FilesystemHandler::Fsync(const Request& request, Reply reply) {
  long index = DiskIndex(fs_, request.nodeid);
  if (index < 0) return reply.Ok();  // nothing to make durable
  fs_.disk_io(index).Flush(fs_.disk(index).QueueFor(0),
                           [reply = Share(std::move(reply))](int64_t result) {
                             ReplyStatus(*reply, result);
                           });
}

void FilesystemHandler::Fallocate(const Request& request, Reply reply) {
  long index = DiskIndex(fs_, request.nodeid);
  if (index < 0) return reply.Error(EOPNOTSUPP);
  uint64_t offset = request.offset;
  uint64_t length = request.length;
  if (length == 0) return reply.Error(EINVAL);
  Disk& disk = fs_.disk(index);
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
      return fs_.disk_io(index).Zero(disk.QueueFor(offset / 512), offset,
                                     length, /*deallocate=*/true, done);
    case FALLOC_FL_ZERO_RANGE:
      return fs_.disk_io(index).Zero(disk.QueueFor(offset / 512), offset,
                                     length, /*deallocate=*/false, done);
    default:
      return done(-EOPNOTSUPP);
  }
}

void FilesystemHandler::Statfs(const Request&, Reply reply) {
  uint64_t total = 0;
  for (size_t i = 0; i < fs_.disk_count(); ++i) {
    total += fs_.disk(i).size_bytes();
  }
  abi::fuse_statfs_out out{};
  out.st.bsize = 4096;
  out.st.frsize = 4096;
  out.st.blocks = total / 4096;
  out.st.files = fs_.disk_count() + 3;
  out.st.namelen = 255;
  reply.Struct(out);
}

}  // namespace pvdisk::fuse
