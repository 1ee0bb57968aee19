// The FUSE kernel ABI that pvdisk speaks: the wire structs and constants of
// protocol 7.42 that the requests we serve need, including FUSE_INIT_EXT
// (flags2) and FUSE-over-io_uring (FUSE_OVER_IO_URING and the fuse_uring_*
// structs).
//
// Written from the documented ABI (include/uapi/linux/fuse.h and
// Documentation/filesystems/fuse*.rst): linux-libc-dev on Debian 12 ships
// protocol 7.38, which has no io_uring part, so we define our own. Every
// struct is checked against the size the ABI gives it.
#pragma once

#include <cstdint>

namespace pvdisk::fuse::abi {

inline constexpr uint32_t kKernelVersion = 7;
// The minor version we implement (7.42 added FUSE-over-io_uring).
inline constexpr uint32_t kKernelMinorVersion = 42;
inline constexpr uint64_t kRootId = 1;
// Smallest buffer a read() of /dev/fuse accepts.
inline constexpr uint32_t kMinReadBuffer = 8192;

enum Opcode : uint32_t {
  kLookup = 1,
  kForget = 2,
  kGetattr = 3,
  kSetattr = 4,
  kReadlink = 5,
  kSymlink = 6,
  kMknod = 8,
  kMkdir = 9,
  kUnlink = 10,
  kRmdir = 11,
  kRename = 12,
  kLink = 13,
  kOpen = 14,
  kRead = 15,
  kWrite = 16,
  kStatfs = 17,
  kRelease = 18,
  kFsync = 20,
  kSetxattr = 21,
  kGetxattr = 22,
  kListxattr = 23,
  kRemovexattr = 24,
  kFlush = 25,
  kInit = 26,
  kOpendir = 27,
  kReaddir = 28,
  kReleasedir = 29,
  kFsyncdir = 30,
  kGetlk = 31,
  kSetlk = 32,
  kSetlkw = 33,
  kAccess = 34,
  kCreate = 35,
  kInterrupt = 36,
  kBmap = 37,
  kDestroy = 38,
  kIoctl = 39,
  kPoll = 40,
  kNotifyReply = 41,
  kBatchForget = 42,
  kFallocate = 43,
  kReaddirplus = 44,
  kRename2 = 45,
  kLseek = 46,
  kCopyFileRange = 47,
  kSetupMapping = 48,
  kRemoveMapping = 49,
  kSyncfs = 50,
  kTmpfile = 51,
  kStatx = 52,
};

// fuse_init_in.flags / fuse_init_out.flags (bits 0-31) and flags2 (bits
// 32-63, as one 64-bit set).
enum InitFlag : uint64_t {
  kAsyncRead = 1ULL << 0,
  kAtomicOTrunc = 1ULL << 3,
  kBigWrites = 1ULL << 5,
  kSpliceWrite = 1ULL << 7,
  kSpliceMove = 1ULL << 8,
  kSpliceRead = 1ULL << 9,
  kAutoInvalData = 1ULL << 12,
  kAsyncDio = 1ULL << 15,
  kWritebackCache = 1ULL << 16,
  kParallelDirops = 1ULL << 18,
  kHandleKillpriv = 1ULL << 19,
  kMaxPages = 1ULL << 22,
  kInitExt = 1ULL << 30,
  kOverIoUring = 1ULL << 41,
};

// fuse_open_out.open_flags.
inline constexpr uint32_t kFopenDirectIo = 1u << 0;
inline constexpr uint32_t kFopenKeepCache = 1u << 1;
inline constexpr uint32_t kFopenNonseekable = 1u << 2;
inline constexpr uint32_t kFopenParallelDirectWrites = 1u << 6;

// fuse_setattr_in.valid.
inline constexpr uint32_t kFattrMode = 1u << 0;
inline constexpr uint32_t kFattrUid = 1u << 1;
inline constexpr uint32_t kFattrGid = 1u << 2;
inline constexpr uint32_t kFattrSize = 1u << 3;

// fuse_fsync_in.fsync_flags.
inline constexpr uint32_t kFsyncFdatasync = 1u << 0;

struct fuse_in_header {
  uint32_t len;  // the whole request, header included
  uint32_t opcode;
  uint64_t unique;
  uint64_t nodeid;
  uint32_t uid;
  uint32_t gid;
  uint32_t pid;
  uint16_t total_extlen;  // extension bytes at the end, in units of 8
  uint16_t padding;
};
static_assert(sizeof(fuse_in_header) == 40);

struct fuse_out_header {
  uint32_t len;   // the whole reply, header included
  int32_t error;  // 0 or a negative errno
  uint64_t unique;
};
static_assert(sizeof(fuse_out_header) == 16);

struct fuse_attr {
  uint64_t ino;
  uint64_t size;
  uint64_t blocks;
  uint64_t atime;
  uint64_t mtime;
  uint64_t ctime;
  uint32_t atimensec;
  uint32_t mtimensec;
  uint32_t ctimensec;
  uint32_t mode;
  uint32_t nlink;
  uint32_t uid;
  uint32_t gid;
  uint32_t rdev;
  uint32_t blksize;
  uint32_t flags;
};
static_assert(sizeof(fuse_attr) == 88);

struct fuse_kstatfs {
  uint64_t blocks;
  uint64_t bfree;
  uint64_t bavail;
  uint64_t files;
  uint64_t ffree;
  uint32_t bsize;
  uint32_t namelen;
  uint32_t frsize;
  uint32_t padding;
  uint32_t spare[6];
};
static_assert(sizeof(fuse_kstatfs) == 80);

struct fuse_entry_out {
  uint64_t nodeid;
  uint64_t generation;
  uint64_t entry_valid;  // seconds
  uint64_t attr_valid;
  uint32_t entry_valid_nsec;
  uint32_t attr_valid_nsec;
  fuse_attr attr;
};
static_assert(sizeof(fuse_entry_out) == 128);

struct fuse_forget_in {
  uint64_t nlookup;
};
struct fuse_forget_one {
  uint64_t nodeid;
  uint64_t nlookup;
};
struct fuse_batch_forget_in {
  uint32_t count;
  uint32_t dummy;
};
static_assert(sizeof(fuse_forget_one) == 16);
static_assert(sizeof(fuse_batch_forget_in) == 8);

struct fuse_getattr_in {
  uint32_t getattr_flags;
  uint32_t dummy;
  uint64_t fh;
};
static_assert(sizeof(fuse_getattr_in) == 16);

struct fuse_attr_out {
  uint64_t attr_valid;  // seconds
  uint32_t attr_valid_nsec;
  uint32_t dummy;
  fuse_attr attr;
};
static_assert(sizeof(fuse_attr_out) == 104);

struct fuse_setattr_in {
  uint32_t valid;
  uint32_t padding;
  uint64_t fh;
  uint64_t size;
  uint64_t lock_owner;
  uint64_t atime;
  uint64_t mtime;
  uint64_t ctime;
  uint32_t atimensec;
  uint32_t mtimensec;
  uint32_t ctimensec;
  uint32_t mode;
  uint32_t unused4;
  uint32_t uid;
  uint32_t gid;
  uint32_t unused5;
};
static_assert(sizeof(fuse_setattr_in) == 88);

struct fuse_open_in {
  uint32_t flags;
  uint32_t open_flags;
};
static_assert(sizeof(fuse_open_in) == 8);

struct fuse_open_out {
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
};
static_assert(sizeof(fuse_open_out) == 16);

struct fuse_release_in {
  uint64_t fh;
  uint32_t flags;
  uint32_t release_flags;
  uint64_t lock_owner;
};
static_assert(sizeof(fuse_release_in) == 24);

struct fuse_flush_in {
  uint64_t fh;
  uint32_t unused;
  uint32_t padding;
  uint64_t lock_owner;
};
static_assert(sizeof(fuse_flush_in) == 24);

// READ and READDIR.
struct fuse_read_in {
  uint64_t fh;
  uint64_t offset;
  uint32_t size;
  uint32_t read_flags;
  uint64_t lock_owner;
  uint32_t flags;
  uint32_t padding;
};
static_assert(sizeof(fuse_read_in) == 40);

struct fuse_write_in {
  uint64_t fh;
  uint64_t offset;
  uint32_t size;
  uint32_t write_flags;
  uint64_t lock_owner;
  uint32_t flags;
  uint32_t padding;
};
static_assert(sizeof(fuse_write_in) == 40);

struct fuse_write_out {
  uint32_t size;
  uint32_t padding;
};
static_assert(sizeof(fuse_write_out) == 8);

struct fuse_statfs_out {
  fuse_kstatfs st;
};

struct fuse_fsync_in {
  uint64_t fh;
  uint32_t fsync_flags;
  uint32_t padding;
};
static_assert(sizeof(fuse_fsync_in) == 16);

struct fuse_interrupt_in {
  uint64_t unique;
};

struct fuse_fallocate_in {
  uint64_t fh;
  uint64_t offset;
  uint64_t length;
  uint32_t mode;
  uint32_t padding;
};
static_assert(sizeof(fuse_fallocate_in) == 32);

// INIT as a 7.36+ kernel sends it; older kernels send only the first 16
// bytes (up to and including flags).
struct fuse_init_in {
  uint32_t major;
  uint32_t minor;
  uint32_t max_readahead;
  uint32_t flags;
  uint32_t flags2;
  uint32_t unused[11];
};
static_assert(sizeof(fuse_init_in) == 64);
inline constexpr uint32_t kInitInCompatSize = 16;

struct fuse_init_out {
  uint32_t major;
  uint32_t minor;
  uint32_t max_readahead;
  uint32_t flags;
  uint16_t max_background;
  uint16_t congestion_threshold;
  uint32_t max_write;
  uint32_t time_gran;
  uint16_t max_pages;
  uint16_t map_alignment;
  uint32_t flags2;
  uint32_t max_stack_depth;
  uint16_t request_timeout;
  uint16_t unused[11];
};
static_assert(sizeof(fuse_init_out) == 64);
// What a kernel older than 7.23 expects.
inline constexpr uint32_t kInitOutCompat22Size = 24;

struct fuse_dirent {
  uint64_t ino;
  uint64_t off;
  uint32_t namelen;
  uint32_t type;
  // char name[namelen], then zero padding to a multiple of 8.
};
static_assert(sizeof(fuse_dirent) == 24);

// ioctl on /dev/fuse: make a clone fd that serves the same connection.
inline constexpr unsigned long kDevIocClone = 0x8004e500;  // _IOR(229, 0, u32)

// FUSE-over-io_uring (protocol 7.42). Each ring entry registers two buffers:
// a header buffer holding a fuse_uring_req_header and a payload buffer.
inline constexpr uint32_t kUringInOutHeaderSize = 128;
inline constexpr uint32_t kUringOpInOutSize = 128;

struct fuse_uring_ent_in_out {
  uint64_t flags;
  // The request's unique; the server returns it in COMMIT_AND_FETCH.
  uint64_t commit_id;
  // Bytes used in the payload buffer (request args in, reply args out).
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
static_assert(sizeof(fuse_uring_ent_in_out) == 32);

struct fuse_uring_req_header {
  // fuse_in_header on the way in, fuse_out_header on the way out.
  char in_out[kUringInOutHeaderSize];
  // The opcode's first argument (e.g. fuse_read_in).
  char op_in[kUringOpInOutSize];
  fuse_uring_ent_in_out ring_ent_in_out;
};
static_assert(sizeof(fuse_uring_req_header) == 288);

enum UringCmd : uint32_t {
  kUringCmdInvalid = 0,
  kUringCmdRegister = 1,
  kUringCmdCommitAndFetch = 2,
};

// In the 80-byte command area of a 128-byte SQE.
struct fuse_uring_cmd_req {
  uint64_t flags;
  uint64_t commit_id;  // COMMIT_AND_FETCH: the unique being answered
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(fuse_uring_cmd_req) == 24);

}  // namespace pvdisk::fuse::abi
