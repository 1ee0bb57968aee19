#include "fuse/protocol/reply.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "base/log.h"

namespace pvdisk::fuse::protocol {

Reply& Reply::operator=(Reply&& other) noexcept {
  if (this != &other) {
    if (pending()) Error(EIO);
    sink_ = other.sink_;
    slot_ = other.slot_;
    unique_ = other.unique_;
    other.sink_ = nullptr;
  }
  return *this;
}

Reply::~Reply() {
  if (pending()) {
    LogInfo("FUSE request %u was never answered; answering EIO", unique_);
    Error(EIO);
  }
}

void Reply::Send(int error, std::span<const iovec> payload) {
  ReplySink* sink = sink_;
  if (sink == nullptr) return;  // answered already
  sink_ = nullptr;
  sink->Send(slot_, unique_, error,
             error == 0 ? payload : std::span<const iovec>());
}

void Reply::Error(int error) { Send(error < 0 ? -error : error, {}); }

void Reply::Data(std::span<const iovec> payload) { Send(0, payload); }

void Reply::Bytes(const void* data, size_t size) {
  iovec piece{const_cast<void*>(data), size};
  Send(0, size == 0 ? std::span<const iovec>()
                    : std::span<const iovec>(&piece, 1));
}

abi::fuse_attr AttrFromStat(const struct stat& st) {
  abi::fuse_attr attr{};
  attr.ino = st.st_ino;
  attr.size = static_cast<uint64_t>(st.st_size);
  attr.blocks = static_cast<uint64_t>(st.st_blocks);
  attr.atime = static_cast<uint64_t>(st.st_atim.tv_sec);
  attr.mtime = static_cast<uint64_t>(st.st_mtim.tv_sec);
  attr.ctime = static_cast<uint64_t>(st.st_ctim.tv_sec);
  attr.atimensec = static_cast<uint32_t>(st.st_atim.tv_nsec);
  attr.mtimensec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  attr.ctimensec = static_cast<uint32_t>(st.st_ctim.tv_nsec);
  attr.mode = st.st_mode;
  attr.nlink = static_cast<uint32_t>(st.st_nlink);
  attr.uid = st.st_uid;
  attr.gid = st.st_gid;
  attr.rdev = static_cast<uint32_t>(st.st_rdev);
  attr.blksize = static_cast<uint32_t>(st.st_blksize);
  return attr;
}

namespace {

void SplitTimeout(double timeout, uint64_t* seconds, uint32_t* nanos) {
  if (timeout <= 0) {
    *seconds = 0;
    *nanos = 0;
    return;
  }
  double whole = std::floor(timeout);
  *seconds = static_cast<uint64_t>(whole);
  *nanos = static_cast<uint32_t>((timeout - whole) * 1e9);
}

}  // namespace

abi::fuse_attr_out AttrOut(const struct stat& st, double timeout) {
  abi::fuse_attr_out out{};
  SplitTimeout(timeout, &out.attr_valid, &out.attr_valid_nsec);
  out.attr = AttrFromStat(st);
  return out;
}

abi::fuse_entry_out EntryOut(uint64_t nodeid, const struct stat& st,
                             double timeout) {
  return EntryOut(nodeid, st, timeout, timeout);
}

abi::fuse_entry_out EntryOut(uint64_t nodeid, const struct stat& st,
                             double entry_timeout, double attr_timeout) {
  abi::fuse_entry_out out{};
  out.nodeid = nodeid;
  SplitTimeout(entry_timeout, &out.entry_valid, &out.entry_valid_nsec);
  SplitTimeout(attr_timeout, &out.attr_valid, &out.attr_valid_nsec);
  out.attr = AttrFromStat(st);
  return out;
}

abi::fuse_open_out OpenOut(uint64_t fh, uint32_t open_flags) {
  abi::fuse_open_out out{};
  out.fh = fh;
  out.open_flags = open_flags;
  return out;
}

abi::fuse_write_out WriteOut(uint32_t size) {
  abi::fuse_write_out out{};
  out.size = size;
  return out;
}

bool AddDirent(std::span<uint8_t> buffer, size_t* used, std::string_view name,
               uint64_t ino, uint32_t mode, uint64_t next_offset) {
  size_t entry = sizeof(abi::fuse_dirent) + name.size();
  size_t padded = (entry + 7) & ~size_t{7};
  if (*used > buffer.size() || padded > buffer.size() - *used) return false;
  abi::fuse_dirent dirent{};
  dirent.ino = ino;
  dirent.off = next_offset;
  dirent.namelen = static_cast<uint32_t>(name.size());
  dirent.type = (mode & S_IFMT) >> 12;
  uint8_t* at = buffer.data() + *used;
  std::memcpy(at, &dirent, sizeof(dirent));
  std::memcpy(at + sizeof(dirent), name.data(), name.size());
  std::memset(at + entry, 0, padded - entry);
  *used += padded;
  return true;
}

}  // namespace pvdisk::fuse::protocol
