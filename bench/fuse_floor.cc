// fuse_floor: the cost of FUSE alone, as a benchmark target.
//
// A trivial libfuse low-level server with one file, `disk`, of a given size:
// reads are answered with zeros and writes acknowledged, inline in the FUSE
// worker thread that received them. No rings, no backend, no disk. It uses
// the same libfuse settings as pvdisk (clone_fd, 4 workers, max_background
// 4096, direct_io, no splice), so fio on it measures the ceiling that the
// kernel's /dev/fuse path and libfuse 3.14 leave to any FUSE disk on this
// machine; bench/compare runs it beside pvdisk --engine null.
//
// usage: fuse_floor MOUNTPOINT SIZE_BYTES   (foreground; ends on unmount,
//        SIGTERM or SIGINT: fusermount3 -u MOUNTPOINT)
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr fuse_ino_t kDiskInode = 2;
constexpr const char* kDiskName = "disk";
constexpr unsigned kMaxRequestBytes = 1 << 20;
constexpr unsigned kMaxBackground = 4096;
constexpr unsigned kWorkers = 4;

uint64_t g_size = 0;
// What every read returns: 1 MiB of zeros, the largest FUSE request.
char g_zeros[kMaxRequestBytes];

void FillAttr(fuse_ino_t ino, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = ino;
  if (ino == FUSE_ROOT_ID) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
  } else {
    st->st_mode = S_IFREG | 0644;
    st->st_nlink = 1;
    st->st_size = static_cast<off_t>(g_size);
  }
}

void OnInit(void*, fuse_conn_info* conn) {
  conn->max_write = kMaxRequestBytes;
  conn->max_background = kMaxBackground;
  conn->congestion_threshold = kMaxBackground * 3 / 4;
  conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
                  FUSE_CAP_SPLICE_MOVE | FUSE_CAP_WRITEBACK_CACHE);
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent != FUSE_ROOT_ID || std::strcmp(name, kDiskName) != 0) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param entry;
  std::memset(&entry, 0, sizeof(entry));
  entry.ino = kDiskInode;
  entry.attr_timeout = entry.entry_timeout = 60.0;
  FillAttr(kDiskInode, &entry.attr);
  fuse_reply_entry(req, &entry);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID && ino != kDiskInode) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct stat st;
  FillAttr(ino, &st);
  fuse_reply_attr(req, &st, 60.0);
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino != kDiskInode) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  fi->direct_io = 1;
  fuse_reply_open(req, fi);
}

void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t offset,
            fuse_file_info*) {
  uint64_t from = static_cast<uint64_t>(offset);
  size_t count = from >= g_size ? 0 : std::min<uint64_t>(size, g_size - from);
  fuse_reply_buf(req, g_zeros, std::min<size_t>(count, sizeof(g_zeros)));
}

void OnWrite(fuse_req_t req, fuse_ino_t, const char*, size_t size, off_t,
             fuse_file_info*) {
  fuse_reply_write(req, size);
}

void OnFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) {
  fuse_reply_err(req, 0);
}

}  // namespace

int main(int argc, char** argv) {
  char* end = nullptr;
  if (argc != 3 || (g_size = std::strtoull(argv[2], &end, 10)) == 0 ||
      *end != '\0') {
    std::fprintf(stderr,
                 "usage: fuse_floor MOUNTPOINT SIZE_BYTES (SIZE_BYTES > 0)\n");
    return 2;
  }
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.getattr = OnGetattr;
  ops.open = OnOpen;
  ops.read = OnRead;
  ops.write = OnWrite;
  ops.fsync = OnFsync;

  std::string options = "fsname=fuse_floor,default_permissions";
  if (geteuid() == 0) options += ",allow_other";
  const char* args_v[] = {"fuse_floor", "-o", options.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(args_v));
  fuse_session* session = fuse_session_new(&args, &ops, sizeof(ops), nullptr);
  if (session == nullptr) return 1;
  if (fuse_set_signal_handlers(session) != 0 ||
      fuse_session_mount(session, argv[1]) != 0) {
    std::fprintf(stderr, "fuse_floor: cannot mount on %s\n", argv[1]);
    fuse_session_destroy(session);
    return 1;
  }
  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(config, 1);
  fuse_loop_cfg_set_max_threads(config, kWorkers);
  int rc = fuse_session_loop_mt(session, config);
  fuse_loop_cfg_destroy(config);
  fuse_session_unmount(session);
  fuse_remove_signal_handlers(session);
  fuse_session_destroy(session);
  return rc < 0 ? 1 : 0;
}
