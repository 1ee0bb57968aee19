#include "fuse/fuse_ops.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "fuse/attributes.h"
#include "fuse/filesystem.h"
#include "fuse/inodes.h"
#include "stats/counters.h"
#include "stats/stats_command.h"

namespace pvdisk::fuse {
namespace {

using stats::Counter;

// Disks never change size, so the kernel may cache their attributes.
constexpr double kDiskAttrTimeout = 60.0;
constexpr double kStatsAttrTimeout = 1.0;
// The most a single FUSE request carries (max_write, and max_pages = 256).
constexpr unsigned kMaxRequestBytes = 1 << 20;
// Far above the kernel's default of 12, which alone caps an iodepth-32 job
// at 12 requests in flight (reference/fuse.md §2.1).
constexpr unsigned kMaxBackground = 4096;

Filesystem& Fs(fuse_req_t req) {
  return *static_cast<Filesystem*>(fuse_req_userdata(req));
}

const timespec& MountTime() {
  static const timespec now = [] {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t;
  }();
  return now;
}

// Index of the disk behind `ino`, or -1.
long DiskIndex(Filesystem& fs, fuse_ino_t ino) {
  if (ino < kFirstDiskInode) return -1;
  size_t index = ino - kFirstDiskInode;
  return index < fs.disk_count() ? static_cast<long>(index) : -1;
}

// The attributes of `ino` (see attributes.h for who may do what) and how
// long the kernel may cache them; false if there is no such inode.
bool Attributes(Filesystem& fs, fuse_ino_t ino, struct stat* st,
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
  } else if (ino == kStatsJsonInode) {
    node = Node::kStatsJson;
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

void ReplyEntry(fuse_req_t req, Filesystem& fs, fuse_ino_t ino) {
  fuse_entry_param entry;
  std::memset(&entry, 0, sizeof(entry));
  double timeout;
  if (!Attributes(fs, ino, &entry.attr, &timeout)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  entry.ino = ino;
  entry.attr_timeout = timeout;
  entry.entry_timeout = timeout;
  fuse_reply_entry(req, &entry);
}

void OnInit(void*, fuse_conn_info* conn) {
  conn->max_write = kMaxRequestBytes;
  conn->max_read = 0;  // no limit beyond max_pages
  conn->max_background = kMaxBackground;
  conn->congestion_threshold = kMaxBackground * 3 / 4;
  // One read() per request is cheaper than splice + read for small requests,
  // and we copy WRITE data into the ring's pages anyway.
  conn->want &= ~FUSE_CAP_SPLICE_READ;
  conn->want &= ~FUSE_CAP_SPLICE_WRITE;
  conn->want &= ~FUSE_CAP_SPLICE_MOVE;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  if (conn->capable & FUSE_CAP_ASYNC_DIO) conn->want |= FUSE_CAP_ASYNC_DIO;
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Filesystem& fs = Fs(req);
  if (parent != kRootInode) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  std::string_view wanted(name);
  if (wanted == kStatsName) return ReplyEntry(req, fs, kStatsInode);
  if (wanted == kStatsJsonName) return ReplyEntry(req, fs, kStatsJsonInode);
  for (size_t i = 0; i < fs.disk_count(); ++i) {
    if (fs.disk(i).name() == wanted) return ReplyEntry(req, fs, DiskInode(i));
  }
  fuse_reply_err(req, ENOENT);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  double timeout;
  if (!Attributes(Fs(req), ino, &st, &timeout)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_reply_attr(req, &st, timeout);
}

void OnSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
               fuse_file_info*) {
  Filesystem& fs = Fs(req);
  if (to_set & FUSE_SET_ATTR_SIZE) {
    long index = DiskIndex(fs, ino);
    // A disk keeps its size; truncating the stats file (echo reset > stats
    // opens it with O_TRUNC) is a no-op.
    bool same_size = index >= 0 && static_cast<uint64_t>(attr->st_size) ==
                                       fs.disk(index).size_bytes();
    bool stats_truncate = ino == kStatsInode && attr->st_size == 0;
    if (!same_size && !stats_truncate) {
      fuse_reply_err(req, index >= 0 ? EINVAL : EACCES);
      return;
    }
  }
  // Owner, mode and time changes are accepted and ignored: the attributes
  // describe the disk, not a file that keeps them.
  OnGetattr(req, ino, nullptr);
}

void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
               fuse_file_info*) {
  Filesystem& fs = Fs(req);
  if (ino != kRootInode) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  struct Entry {
    std::string name;
    fuse_ino_t ino;
  };
  std::vector<Entry> entries = {{".", kRootInode},
                                {"..", kRootInode},
                                {kStatsName, kStatsInode},
                                {kStatsJsonName, kStatsJsonInode}};
  for (size_t i = 0; i < fs.disk_count(); ++i) {
    entries.push_back({fs.disk(i).name(), DiskInode(i)});
  }
  std::string buffer(size, '\0');
  size_t used = 0;
  for (size_t i = static_cast<size_t>(offset); i < entries.size(); ++i) {
    struct stat st;
    double timeout;
    Attributes(fs, entries[i].ino, &st, &timeout);
    size_t need = fuse_add_direntry(req, buffer.data() + used, size - used,
                                    entries[i].name.c_str(), &st,
                                    static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buffer.data(), used);
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Filesystem& fs = Fs(req);
  int access = fi->flags & O_ACCMODE;
  fi->direct_io = 1;
  fi->keep_cache = 0;
  if (ino == kStatsInode || ino == kStatsJsonInode) {
    if (ino == kStatsJsonInode && access != O_RDONLY) {
      fuse_reply_err(req, EACCES);
      return;
    }
    // Snapshot at open, so one reader sees one consistent table.
    auto* contents =
        new std::string(ino == kStatsInode ? fs.StatsText() : fs.StatsJson());
    fi->fh = reinterpret_cast<uint64_t>(contents);
    fi->nonseekable = 0;
    fuse_reply_open(req, fi);
    return;
  }
  long index = DiskIndex(fs, ino);
  if (index < 0) {
    fuse_reply_err(req, ino == kRootInode ? EISDIR : ENOENT);
    return;
  }
  if (access != O_RDONLY && fs.disk(index).read_only()) {
    fuse_reply_err(req, EROFS);
    return;
  }
  fi->fh = 0;
  fuse_reply_open(req, fi);
}

void OnRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino == kStatsInode || ino == kStatsJsonInode) {
    delete reinterpret_cast<std::string*>(fi->fh);
  }
  fuse_reply_err(req, 0);
}

uint64_t NowNanos() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void OnRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
            fuse_file_info* fi) {
  Filesystem& fs = Fs(req);
  if (ino == kStatsInode || ino == kStatsJsonInode) {
    const std::string& contents = *reinterpret_cast<std::string*>(fi->fh);
    size_t from = std::min(static_cast<size_t>(offset), contents.size());
    size_t count = std::min(size, contents.size() - from);
    fuse_reply_buf(req, contents.data() + from, count);
    return;
  }
  long index = DiskIndex(fs, ino);
  if (index < 0 || offset < 0) {
    fuse_reply_err(req, index < 0 ? ENOENT : EINVAL);
    return;
  }
  transport::Queue& queue =
      fs.disk(index).QueueFor(static_cast<uint64_t>(offset) / 512);
  stats::QueueStats& queue_stats = queue.stats();
  queue_stats.Add(Counter::fuse_reads);
  uint64_t start = NowNanos();
  fs.disk_io(index).Read(
      queue, static_cast<uint64_t>(offset), size,
      [req, start, &queue_stats](int64_t result, absl::Span<const iovec> data) {
        if (result < 0) {
          fuse_reply_err(req, static_cast<int>(-result));
        } else if (data.empty()) {
          fuse_reply_buf(req, nullptr, 0);
        } else {
          fuse_reply_iov(req, data.data(), static_cast<int>(data.size()));
        }
        queue_stats.RecordLatency(NowNanos() - start);
      });
}

void OnWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size,
             off_t offset, fuse_file_info*) {
  Filesystem& fs = Fs(req);
  if (ino == kStatsInode) {
    if (!stats::ParseStatsCommand(absl::string_view(buf, size)).ok()) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    fs.ResetStats();  // the only command there is
    fuse_reply_write(req, size);
    return;
  }
  long index = DiskIndex(fs, ino);
  if (index < 0 || offset < 0) {
    fuse_reply_err(req, index < 0 ? EACCES : EINVAL);
    return;
  }
  transport::Queue& queue =
      fs.disk(index).QueueFor(static_cast<uint64_t>(offset) / 512);
  stats::QueueStats& queue_stats = queue.stats();
  queue_stats.Add(Counter::fuse_writes);
  uint64_t start = NowNanos();
  fs.disk_io(index).Write(queue, static_cast<uint64_t>(offset),
                          reinterpret_cast<const uint8_t*>(buf), size,
                          [req, start, &queue_stats](int64_t result) {
                            if (result < 0) {
                              fuse_reply_err(req, static_cast<int>(-result));
                            } else {
                              fuse_reply_write(req,
                                               static_cast<size_t>(result));
                            }
                            queue_stats.RecordLatency(NowNanos() - start);
                          });
}

void OnFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  // close() does not make data durable on a block device either; fsync does.
  fuse_reply_err(req, 0);
}

void OnFsync(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info*) {
  Filesystem& fs = Fs(req);
  long index = DiskIndex(fs, ino);
  if (index < 0) {
    fuse_reply_err(req, 0);  // nothing to make durable
    return;
  }
  fs.disk_io(index).Flush(fs.disk(index).QueueFor(0), [req](int64_t result) {
    fuse_reply_err(req, result < 0 ? static_cast<int>(-result) : 0);
  });
}

void OnFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
                 off_t length, fuse_file_info*) {
  Filesystem& fs = Fs(req);
  long index = DiskIndex(fs, ino);
  if (index < 0) {
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  if (offset < 0 || length <= 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  Disk& disk = fs.disk(index);
  if (disk.read_only()) {
    fuse_reply_err(req, EROFS);
    return;
  }
  bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
  int action = mode & ~FALLOC_FL_KEEP_SIZE;
  uint64_t end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(length);
  if (!keep_size && end > disk.size_bytes()) {
    fuse_reply_err(req, ENOSPC);  // a disk cannot grow
    return;
  }
  auto reply = [req](int64_t result) {
    fuse_reply_err(req, result < 0 ? static_cast<int>(-result) : 0);
  };
  switch (action) {
    case 0:
      // Plain allocation: every sector of a disk already exists.
      fuse_reply_err(req, 0);
      return;
    case FALLOC_FL_PUNCH_HOLE:
      if (!keep_size) {
        fuse_reply_err(req, EINVAL);  // the kernel's rule for regular files
        return;
      }
      fs.disk_io(index).Zero(fs.disk(index).QueueFor(offset / 512), offset,
                             length, /*deallocate=*/true, reply);
      return;
    case FALLOC_FL_ZERO_RANGE:
      fs.disk_io(index).Zero(fs.disk(index).QueueFor(offset / 512), offset,
                             length, /*deallocate=*/false, reply);
      return;
    default:
      fuse_reply_err(req, EOPNOTSUPP);
  }
}

void OnStatfs(fuse_req_t req, fuse_ino_t) {
  Filesystem& fs = Fs(req);
  struct statvfs st;
  std::memset(&st, 0, sizeof(st));
  uint64_t total = 0;
  for (size_t i = 0; i < fs.disk_count(); ++i) total += fs.disk(i).size_bytes();
  st.f_bsize = 4096;
  st.f_frsize = 4096;
  st.f_blocks = total / 4096;
  st.f_files = fs.disk_count() + 3;
  st.f_namemax = 255;
  fuse_reply_statfs(req, &st);
}

}  // namespace

const fuse_lowlevel_ops& FilesystemOps() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof(o));
    o.init = OnInit;
    o.lookup = OnLookup;
    o.getattr = OnGetattr;
    o.setattr = OnSetattr;
    o.readdir = OnReaddir;
    o.open = OnOpen;
    o.release = OnRelease;
    o.read = OnRead;
    o.write = OnWrite;
    o.flush = OnFlush;
    o.fsync = OnFsync;
    o.fallocate = OnFallocate;
    o.statfs = OnStatfs;
    return o;
  }();
  return ops;
}

}  // namespace pvdisk::fuse
