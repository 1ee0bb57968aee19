#include "io/write_log_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "io/write_log_format.h"

namespace pvdisk::io {
namespace {

// Reads exactly `size` bytes at `offset`; false at the end of the file.
absl::StatusOr<bool> ReadAt(int fd, uint64_t offset, void* into, size_t size,
                            const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, static_cast<uint8_t*>(into) + done, size - done,
                            static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("cannot read the log ", path));
    }
    if (n == 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string WriteLogFlagNames(uint64_t flags) {
  static constexpr struct {
    uint64_t bit;
    const char* name;
  } kNames[] = {{kLogFlush, "FLUSH"},
                {kLogFua, "FUA"},
                {kLogDiscard, "DISCARD"},
                {kLogMark, "MARK"},
                {kLogMetadata, "METADATA"}};
  std::string out;
  for (const auto& name : kNames) {
    if (flags & name.bit)
      absl::StrAppend(&out, out.empty() ? "" : "|", name.name);
  }
  if (const uint64_t other = flags & ~uint64_t{0x1f}; other != 0) {
    absl::StrAppend(&out, out.empty() ? "" : "|", "0x", absl::Hex(other));
  }
  return out.empty() ? "-" : out;
}

absl::StatusOr<WriteLogIndex> ReadWriteLogIndex(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoError(errno, absl::StrCat("cannot open the log ", path));
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return ErrnoError(errno, absl::StrCat("cannot stat the log ", path));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  auto bad = [&path](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a whole dm-log-writes log: ", why));
  };
  WriteLogSuper super{};
  absl::StatusOr<bool> got = ReadAt(fd, 0, &super, sizeof(super), path);
  if (!got.ok()) return got.status();
  if (!*got) {
    return bad(
        absl::StrCat("it has ", file_size, " bytes, less than a superblock"));
  }
  if (super.magic != kWriteLogMagic) {
    return bad(absl::StrCat("its magic is 0x", absl::Hex(super.magic),
                            ", not 0x", absl::Hex(kWriteLogMagic)));
  }
  if (super.version != kWriteLogVersion) {
    return bad(absl::StrCat("its version is ", super.version, ", not ",
                            kWriteLogVersion));
  }
  const uint32_t s = super.sectorsize;
  if (s < 512 || s > 65536 || (s & (s - 1)) != 0) {
    return bad(absl::StrCat("its sector size is ", s,
                            ", not a power of two from 512 to 65536"));
  }
  WriteLogIndex index;
  index.sector_size = s;
  uint64_t at = s;
  std::vector<uint8_t> header(s);
  for (uint64_t i = 0; i < super.nr_entries; ++i) {
    got = ReadAt(fd, at, header.data(), s, path);
    if (!got.ok()) return got.status();
    if (!*got) {
      return bad(absl::StrCat("truncated: entry ", i, " of ", super.nr_entries,
                              " starts at byte ", at, " of ", file_size));
    }
    WriteLogEntry entry;
    std::memcpy(&entry, header.data(), sizeof(entry));
    WriteLogRecord record;
    record.sector = entry.sector;
    record.nr_sectors = entry.nr_sectors;
    record.flags = entry.flags;
    at += s;
    if (entry.flags & kLogMark) {
      if (entry.data_len > s - sizeof(entry)) {
        return bad(absl::StrCat("entry ", i, " is a mark of ", entry.data_len,
                                " bytes, more than its header sector holds"));
      }
      record.mark.assign(
          reinterpret_cast<const char*>(header.data() + sizeof(entry)),
          entry.data_len);
    } else if (!(entry.flags & kLogDiscard)) {
      if (entry.nr_sectors > (UINT64_MAX - at) / s) {
        return bad(absl::StrCat("entry ", i, " claims ", entry.nr_sectors,
                                " sectors"));
      }
      record.data_offset = at;
      record.data_bytes = entry.nr_sectors * s;
      at += record.data_bytes;
      if (at > file_size) {
        return bad(absl::StrCat("truncated: entry ", i, " of ",
                                super.nr_entries, " ends at byte ", at,
                                ", beyond its ", file_size, " bytes"));
      }
    }
    if (entry.sector > UINT64_MAX / s ||
        entry.nr_sectors > UINT64_MAX / s - entry.sector) {
      return bad(absl::StrCat("entry ", i, " lies beyond any disk"));
    }
    index.entries.push_back(std::move(record));
  }
  return index;
}

}  // namespace pvdisk::io
