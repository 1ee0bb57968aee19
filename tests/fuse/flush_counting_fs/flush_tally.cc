#include "flush_tally.h"

#include <sstream>

namespace pvdisk::flush_counting_fs {

void FlushTally::RecordWrite(const std::string& path, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  files_[path].written += bytes;
}

void FlushTally::RecordFsync(const std::string& path, bool datasync) {
  std::lock_guard<std::mutex> lock(mu_);
  FileTally& tally = files_[path];
  ++(datasync ? tally.fdatasync : tally.fsync);
  tally.written_at_last_fsync = tally.written;
}

void FlushTally::RecordFlush(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  ++files_[path].flush;
}

void FlushTally::RecordFsyncDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  ++files_[path].fsyncdir;
}

std::string FlushTally::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  for (const auto& [path, tally] : files_) {
    out << path << " fsync=" << tally.fsync << " fdatasync=" << tally.fdatasync
        << " flush=" << tally.flush << " fsyncdir=" << tally.fsyncdir
        << " written=" << tally.written
        << " written_at_last_fsync=" << tally.written_at_last_fsync << "\n";
  }
  return out.str();
}

FileTally ParseTally(const std::string& text, const std::string& path) {
  FileTally tally;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (name != path) continue;
    std::string field;
    while (words >> field) {
      size_t eq = field.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = field.substr(0, eq);
      const uint64_t value = std::stoull(field.substr(eq + 1));
      if (key == "fsync") tally.fsync = value;
      if (key == "fdatasync") tally.fdatasync = value;
      if (key == "flush") tally.flush = value;
      if (key == "fsyncdir") tally.fsyncdir = value;
      if (key == "written") tally.written = value;
      if (key == "written_at_last_fsync") tally.written_at_last_fsync = value;
    }
  }
  return tally;
}

}  // namespace pvdisk::flush_counting_fs
